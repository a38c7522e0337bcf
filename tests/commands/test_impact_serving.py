"""Issue 51 item 5: a deployment, GPU or engine change's checklist gives what the
deployment serves before and after (GPUs, KV token capacity, full-context sequences, TPOT,
tokens/s per GPU) and asks to re-apply the manifest when it changed, in words.

Each side's expected numbers are read from `specpair budget --json` and `specpair plan
--json` run on that side's own snapshot of a real git repository, never recomputed here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specpair.cli import main
from specpair.commands.impact import impact, snapshot
from tests.support.git_repo import commit, edit, examples_repo

LING = "runbooks/ling-3-flash-dspark/runbook.yaml"
LLAMA70 = "runbooks/llama33-70b-eagle3-vllm/runbook.yaml"
QWEN = "runbooks/qwen3-8b-dflash/runbook.jsonnet"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _side(capsys: pytest.CaptureFixture[str], repo: Path, rev: str, runbook: str,
          into: Path) -> dict[str, Any]:
    """What `specpair budget --json` and `specpair plan --json` say at `rev`."""
    root, _ = snapshot(repo, rev, into)
    budget = _json(capsys, "budget", str(root / runbook), "--root", str(root), "--json")
    plan = _json(capsys, "plan", str(root / runbook), "--root", str(root), "--json")
    scenario = budget["speculative"] or budget["baseline"]
    return {**plan["current"], "capacity": scenario["max_total_tokens"],
            "sequences": scenario["sequences_at_context"]}


def _arrow(before: Any, after: Any, unit: str = "") -> str:
    if before == after:
        return f"{after:,}{unit} (unchanged)"
    return f"{before:,}{unit} → {after:,}{unit}"


def _expected(b: dict[str, Any], h: dict[str, Any]) -> str:
    return (f"Re-check what the deployment serves (before → after): GPUs "
            f"{_arrow(b['gpus'], h['gpus'])}, KV token capacity "
            f"{_arrow(b['capacity'], h['capacity'])}, full-context sequences "
            f"{_arrow(b['sequences'], h['sequences'])}, TPOT "
            f"{_arrow(b['tpot_ms'], h['tpot_ms'], ' ms')}, tokens/s per GPU "
            f"{_arrow(b['tokens_per_s_per_gpu'], h['tokens_per_s_per_gpu'])} at concurrency "
            f"{_arrow(b['concurrency'], h['concurrency'])}")


CHANGES = {
    "tp": (LING, "ling-3-flash-dspark", "parallel: {tensor: 4}", "parallel: {tensor: 8}"),
    "gpu": (LING, "ling-3-flash-dspark", "gpu: H200-141GB", "gpu: B200-180GB"),
    "release": (LLAMA70, "llama33-70b-eagle3-vllm", "engine: {name: vllm, version: 0.33.0}",
                "engine: {name: vllm, version: 0.34.0}"),
    "engine": (QWEN, "qwen3-8b-dflash", "speculation: { method: 'DFLASH', block_size: 16 },",
               "speculation: { method: 'DFLASH', block_size: 16 },\n"
               "  engine: { name: 'vllm', version: '0.33.0' },"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_deployment_or_engine_change_gives_what_it_serves_before_and_after(
        change: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runbook, name, old, new = CHANGES[change]
    repo = examples_repo(tmp_path)
    commit(repo, lambda r: edit(r, runbook, old, new))
    items, problems = impact(repo, "HEAD~1", "HEAD")
    assert problems == []
    (item,) = [i for i in items if i.name == name]
    b, h = (_side(capsys, repo, rev, runbook, tmp_path / rev.replace("~", "-"))
            for rev in ("HEAD~1", "HEAD"))
    text = "\n".join(item.checklist)
    assert _expected(b, h) in text, text
    if change in ("tp", "gpu"):
        assert item.classes == ["deployment"]
    if change == "tp":  # the numbers a reviewer decides on move with the TP
        assert (b["gpus"], h["gpus"]) == (4, 8)
        assert b["capacity"] != h["capacity"] and b["tpot_ms"] != h["tpot_ms"]
    # a checklist is read: no Python value reaches it
    assert not any(word in text.split() for word in ("True", "False", "None",
                                                     "True,", "False,", "None,"))


def test_the_manifest_is_re_applied_when_it_changed_and_only_then(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TP 4 → 8 changes the pod's GPUs and the server command; a new SLO changes no byte
    of deployment.k8s.yaml (the alerts carry it), so it asks for no re-apply."""
    repo = examples_repo(tmp_path)
    commit(repo, lambda r: edit(r, LING, "parallel: {tensor: 4}", "parallel: {tensor: 8}"))
    commit(repo, lambda r: edit(r, LING, "min_length: 4.0", "min_length: 4.5"))
    (tp,) = impact(repo, "HEAD~2", "HEAD~1")[0]
    assert ("Re-apply runbooks/ling-3-flash-dspark/generated/deployment.k8s.yaml "
            "(`kubectl apply -f` it once rebuilt): the manifest changed (GPUs per pod 4 → 8, "
            "the server command)") in tp.checklist
    (slo,) = impact(repo, "HEAD~1", "HEAD")[0]
    assert slo.classes == ["slo"]
    assert not any(line.startswith("Re-apply") for line in slo.checklist), slo.checklist
    assert not any(line.startswith("Re-check what the deployment serves")
                   for line in slo.checklist)


def test_an_engine_release_budget_line_says_fits_in_words(tmp_path: Path) -> None:
    """Issue 51: the engine upgrade's budget line printed "fits True → True"."""
    repo = examples_repo(tmp_path)
    commit(repo, lambda r: edit(r, LLAMA70, "engine: {name: vllm, version: 0.33.0}",
                                "engine: {name: vllm, version: 0.34.0}"))
    items, _ = impact(repo, "HEAD~1", "HEAD")
    (item,) = [i for i in items if i.name == "llama33-70b-eagle3-vllm"]
    (line,) = [x for x in item.checklist if ": budget: KV token capacity" in x]
    assert line.endswith(", fits → fits"), line
    assert "True" not in line and "False" not in line
