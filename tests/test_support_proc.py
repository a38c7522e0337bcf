"""The tests' subprocess limit is CPU time: a busy loop is stopped by the kernel once it
has used its budget, while a child that only waits is bounded by the hang guard alone."""

from __future__ import annotations

import sys
import time

from tests.support import proc


def test_a_child_over_its_cpu_budget_is_killed() -> None:
    started = time.monotonic()
    done = proc.run([sys.executable, "-c", "while True: pass"], cpu_s=1, check=False)
    assert done.returncode < 0  # SIGXCPU at the soft limit
    assert time.monotonic() - started < proc.HANG_FACTOR


def test_waiting_uses_no_cpu_budget() -> None:
    # 2 s of wall clock on a 1 s CPU budget: sleeping costs no CPU time
    done = proc.run([sys.executable, "-c", "import time; time.sleep(2)"], cpu_s=1,
                    check=False)
    assert done.returncode == 0
