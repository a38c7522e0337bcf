"""Subprocesses bounded by the CPU time they use, not by the wall clock.

A wall-clock limit fails a test when the machine is loaded (two cores shared with other
jobs stretch a 140 s script past 600 s), which says nothing about the code. The child gets
`RLIMIT_CPU` (the kernel kills it once it has used that much CPU, whatever the load), and
the wall clock only guards against a hang (a child that waits without computing): a
generous multiple of the CPU budget.
"""

from __future__ import annotations

import resource
import subprocess
from collections.abc import Sequence
from typing import Any

HANG_FACTOR = 20
"""The wall-clock guard as a multiple of the CPU budget: at a load average of 8 on two
cores a child runs at about a quarter of a core, so 20x leaves room for five times that."""


def _limit_cpu(seconds: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    return apply


def run(cmd: Sequence[str], *, cpu_s: int, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run` with at most `cpu_s` seconds of the child's CPU time (its own
    process; a child it starts gets the same limit on its own) and a hang guard of
    HANG_FACTOR x cpu_s seconds of wall clock."""
    return subprocess.run(cmd, preexec_fn=_limit_cpu(cpu_s),
                          timeout=HANG_FACTOR * cpu_s, **kwargs)


def popen(cmd: Sequence[str], *, cpu_s: int, **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen` with the child's CPU time limited to `cpu_s` seconds; callers
    wait on it with `wait(cpu_s)` (see `wait`)."""
    return subprocess.Popen(cmd, preexec_fn=_limit_cpu(cpu_s), **kwargs)


def wait(process: subprocess.Popen[Any], cpu_s: int) -> int:
    """Wait for a `popen` child: its CPU is bounded by the kernel, the wall clock by the
    hang guard."""
    return process.wait(timeout=HANG_FACTOR * cpu_s)
