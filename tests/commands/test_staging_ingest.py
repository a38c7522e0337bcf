"""`specpair staging ingest` and `calibrate` on logs the generated script really wrote.

A pair is locked against the local hub server with the real hub client, built, and its
stage-and-launch.sh run with the real `hf` command; the engine is the stand-in of
tests/load/test_staging_log.py (the real-engine run is tests/engine/test_staging_e2e.py).
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

from specpair.load.staging_log import parse
from tests.support import proc
from tests.support.hubserver import HubServer
from tests.support.staging import FAKE_ENGINE, free_port, publish, run

RUNBOOK = """\
pair: {{name: hub-pair, title: A pair staged from the hub, owner: tests}}
engine: {{name: vllm, version: 0.33.0}}
target: {{repo: org/target, revision: {target}}}
draft: {{repo: org/draft, revision: {draft}}}
speculation: {{method: STANDALONE, num_speculative_tokens: 3}}
deployment: {{gpu: H100-80GB, context_length: 1024, host: 127.0.0.1, port: {port}}}
acceptance: {{slo: {{min_length: 1.5}}}}
staging: {{cold_start_budget_s: {budget}, warmup: {{prompt: hi, max_tokens: 4, timeout_s: 20}}}}
"""


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        yield server


def specpair(root: Path, hub: HubServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(root / ".hf-lock")}
    env.pop("HF_HUB_OFFLINE", None)
    return proc.run([sys.executable, "-m", "specpair", *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False, cpu_s=300)


def write_runbook(root: Path, hub: HubServer, budget: float) -> Path:
    target = hub.repos["org/target"].refs["main"]
    draft = hub.repos["org/draft"].refs["main"]
    folder = root / "runbooks" / "hub-pair"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "runbook.yaml"
    path.write_text(RUNBOOK.format(target=target, draft=draft, port=free_port(), budget=budget))
    return path


@pytest.fixture
def repo(tmp_path: Path, hub: HubServer) -> Path:
    publish(hub, "org/target", 300_000)
    publish(hub, "org/draft", 20_000)
    root = tmp_path / "repo"
    write_runbook(root, hub, 120)
    for command in (["lock", "runbooks"], ["build"]):
        done = specpair(root, hub, *command)
        assert done.returncode == 0, done.stderr
    return root


def start(root: Path, hub: HubServer, fake: str = "ok") -> tuple[int | None, Path]:
    """Run the generated script with the stand-in engine; the log is its stdout."""
    generated = root / "runbooks" / "hub-pair" / "generated"
    work = root.parent / f"work-{fake}"
    (work / "bin").mkdir(parents=True, exist_ok=True)
    engine = work / "bin" / "vllm"
    engine.write_text(FAKE_ENGINE)
    engine.chmod(engine.stat().st_mode | stat.S_IEXEC)
    code, out = run(generated / "stage-and-launch.sh", hub, fake=fake, work=work)
    log = root / f"deploy-{fake}.log"
    log.write_text(out)
    return code, log


def test_ingest_stores_the_record_and_the_card_shows_measured_against_modelled(
        repo: Path, hub: HubServer) -> None:
    code, log = start(repo, hub)
    assert code is None, log.read_text()
    done = specpair(repo, hub, "staging", "ingest", "runbooks/hub-pair/runbook.yaml", str(log))
    assert done.returncode == 0, done.stderr
    expected = parse(log.read_text(), str(log))
    (stored,) = (repo / "runbooks" / "hub-pair" / "measurements" / "staging").glob("*.json")
    record = json.loads(stored.read_text())
    assert record["total_s"] == expected.total_s and record["status"] == "ok"
    # the card and staging.md show it; a build makes the same bytes
    card = (repo / "runbooks" / "hub-pair" / "generated" / "card.md").read_text()
    assert "## Cold start: measured against modelled" in card
    rows = {line.split("|")[1].strip(): line for line in card.splitlines()
            if line.startswith("| ")}
    for phase in ("staging", "engine_start", "warmup"):
        seconds = next(p.seconds for p in expected.phases if p.phase == phase)
        assert f"| {seconds:,.1f} |" in rows[phase], rows
    assert "↳ stage draft" in rows and "↳ stage target" in rows
    assert f"**{expected.total_s:,.1f}**" in rows["**total**"]
    card_json = json.loads((repo / "runbooks" / "hub-pair" / "generated" /
                            "card.json").read_text())
    assert card_json["cold_start"]["measured_total_s"] == expected.total_s
    assert specpair(repo, hub, "build", "--check").returncode == 0
    # the site page carries the card, measured table included
    assert specpair(repo, hub, "site").returncode == 0
    page = (repo / "site" / "docs" / "pairs" / "hub-pair.md").read_text()
    assert "Cold start: measured against modelled" in page and "↳ stage draft" in page
    # ingesting the same log again changes nothing
    again = specpair(repo, hub, "staging", "ingest", "runbooks/hub-pair/runbook.yaml", str(log))
    assert again.returncode == 0 and len(list(stored.parent.glob("*.json"))) == 1
    gate = json.loads(specpair(repo, hub, "check", "runbooks", "--format", "json").stdout)
    assert [f["rule"] for p in gate for f in p["findings"] if f["rule"] == "SP802"] == []


def test_the_gate_judges_the_latest_measured_start_and_says_so(repo: Path,
                                                                hub: HubServer) -> None:
    # the model says 60 + 5 s and more: with a 3 s budget it fails on the model alone
    write_runbook(repo, hub, 3)
    assert specpair(repo, hub, "build").returncode == 0
    before = specpair(repo, hub, "check", "runbooks", "--strict")
    assert "SP802" in before.stdout and "measured" not in before.stdout
    code, log = start(repo, hub, fake="unhealthy")
    assert code == 4
    done = specpair(repo, hub, "staging", "ingest", "runbooks/hub-pair/runbook.yaml", str(log))
    assert done.returncode == 0, done.stderr
    after = specpair(repo, hub, "check", "runbooks", "--strict")
    line = next(x for x in after.stdout.splitlines() if "SP802" in x)
    assert "the latest recorded start" in line and "failed in engine_start" in line, line
    card = (repo / "runbooks" / "hub-pair" / "generated" / "card.md").read_text()
    assert "failed in **engine_start**" in card


def test_a_log_of_other_artifacts_or_no_log_is_refused(repo: Path, hub: HubServer,
                                                       tmp_path: Path) -> None:
    code, log = start(repo, hub)
    assert code is None
    text = log.read_text()
    other = tmp_path / "other.log"
    revision = hub.repos["org/draft"].refs["main"]
    other.write_text(text.replace(revision, "e" * 40))
    done = specpair(repo, hub, "staging", "ingest", "runbooks/hub-pair/runbook.yaml",
                    str(other))
    assert done.returncode == 1
    assert f"the runbook pins org/draft@{revision}" in done.stderr and str(other) in done.stderr
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(text.splitlines()[:5]) + "\n")
    done = specpair(repo, hub, "staging", "ingest", "runbooks/hub-pair/runbook.yaml", str(cut))
    assert done.returncode == 1 and "no total line" in done.stderr
    assert not (repo / "runbooks" / "hub-pair" / "measurements").exists()


def test_calibrate_derives_the_assumptions_with_provenance(repo: Path, hub: HubServer) -> None:
    code, log = start(repo, hub)
    assert code is None
    assert specpair(repo, hub, "staging", "ingest", "runbooks/hub-pair/runbook.yaml",
                    str(log)).returncode == 0
    record = parse(log.read_text(), str(log))
    done = specpair(repo, hub, "staging", "calibrate", "runbooks/hub-pair/runbook.yaml")
    assert done.returncode == 0, done.stderr
    stream = [a.bytes / a.seconds for a in record.artifacts]
    stream.sort()
    median = (stream[0] + stream[1]) / 2
    assert f"  stream_bandwidth_bytes_per_s: {round(median):g}  # 2 point(s): " \
           "measurements/staging/" in done.stdout, done.stdout
    warm = next(p.seconds for p in record.phases if p.phase == "warmup")
    assert f"  warmup_s: {round(warm, 2):g}  # 1 point(s)" in done.stdout
    staging = json.loads((repo / "runbooks" / "hub-pair" / "generated" /
                          "staging.json").read_text())
    assert staging["calibration"]["used"] == [staging["measured"]["record"]]


def test_ingest_takes_the_build_lock(repo: Path, hub: HubServer) -> None:
    # a build running meanwhile loaded the records of before and wrote that card after
    # ingest wrote the new one (stale bytes in 5 of 12 trials); ingest now waits for it
    import time

    from specpair.commands.build import exclusive

    code, log = start(repo, hub)
    assert code is None, log.read_text()
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(repo / ".hf-lock")}
    records = repo / "runbooks" / "hub-pair" / "measurements" / "staging"
    with exclusive(repo):  # as a build holds it
        process = proc.popen([sys.executable, "-m", "specpair", "staging", "ingest",
                              "runbooks/hub-pair/runbook.yaml", str(log)], cpu_s=120, cwd=repo,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(3)
        assert process.poll() is None and not records.exists()
    assert proc.wait(process, 120) == 0, process.communicate()
    assert len(list(records.glob("*.json"))) == 1
    assert specpair(repo, hub, "build", "--check").returncode == 0
