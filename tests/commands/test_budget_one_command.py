"""Issue 51, "a budget in one command": `specpair budget --target … --draft …` gives, for
every example pair, the budget its runbook gives, from inputs built out of the example's
lock (each geometry written out as a config.json, its weight bytes as flags) and runbook
(its fields as options), offline, with no runbook on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specpair.cli import main
from specpair.load.runbooks import RUNBOOK_NAMES, load_lock, load_runbook
from specpair.model.config_geometry import from_hf_config
from tests.support.lock_inputs import flags_of, write_checkpoint
from tests.support.paths import REPO

EXAMPLES = sorted(p.parent.name for name in RUNBOOK_NAMES
                  for p in (REPO / "runbooks").glob(f"*/{name}"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def one_command_flags(example: str, tmp_path: Path) -> tuple[list[str], Path]:
    (runbook,) = [p for name in RUNBOOK_NAMES
                  if (p := REPO / "runbooks" / example / name).is_file()]
    rb = load_runbook(runbook).runbook
    lock, _ = load_lock(runbook.parent)
    target = write_checkpoint(tmp_path / "target", lock.target)
    draft, draft_bytes = None, None
    if lock.draft is not None:
        draft_bytes = lock.draft.weights.weight_bytes
        if not lock.draft.weights.inside_target:
            draft = write_checkpoint(tmp_path / "draft", lock.draft)
    return flags_of(rb, target, draft, lock.target.weights.weight_bytes, draft_bytes), runbook


def test_every_example_is_covered() -> None:
    assert len(EXAMPLES) == len(list((REPO / "runbooks").glob("*/lock.json"))) >= 9


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_one_command_budget_is_the_runbook_budget(
        example: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # local folders only: nothing may ask a hub
    flags, runbook = one_command_flags(example, tmp_path)
    for folder in (tmp_path / "target", tmp_path / "draft"):
        if folder.is_dir():  # the config written out reads back as the lock's geometry
            locked = load_lock(runbook.parent)[0]
            art = locked.target if folder.name == "target" else locked.draft
            assert art is not None
            read = from_hf_config(json.loads((folder / "config.json").read_text()))
            assert read.model_dump(exclude={"layers"}) == art.geometry.model_dump(
                exclude={"layers"})
    status, out, err = run(capsys, "budget", *flags, "--json")
    assert status == 0, err
    one: dict[str, Any] = json.loads(out)
    break_even = one.pop("break_even")
    status, out, err = run(capsys, "budget", str(runbook), "--root", str(REPO), "--json")
    assert status == 0, err
    assert one == json.loads(out)
    # the break-even is the runbook's own (generated/breakeven.json, committed and current)
    # where the lock holds no step-model fact beyond the flags' (see STEP_FACTS_BEYOND_FLAGS)
    committed = json.loads((runbook.parent / "generated" / "breakeven.json").read_text())
    if example in STEP_FACTS_BEYOND_FLAGS:
        assert "not_modelled" not in break_even and "not_modelled" not in committed
        assert break_even["capacity"] == committed["capacity"]
        return
    if "not_modelled" in committed:
        assert break_even == {"not_modelled": committed["not_modelled"]}
    else:
        here = committed["at_concurrency"]
        assert break_even == {"capacity": committed["capacity"], "slo": committed["slo"], **{
            k: here[k] for k in break_even if k not in ("capacity", "slo")}}
        assert set(break_even) > {"break_even", "break_even_range", "speedup_at_slo"}


STEP_FACTS_BEYOND_FLAGS = {"deepseek-v3-mtp", "ling-3-flash-dspark"}
"""Examples whose locks declare what the step model reads and no config.json, safetensors
header or `lock --declare` states: active parameters of a MoE (model cards: "37B
activated", "A5.1B") or parameters in a dtype other than the config's (DeepSeek-V3's FP8
release). Their memory budget is equal; their break-even needs those facts."""


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_break_even_gap_is_exactly_the_declared_step_facts(example: str) -> None:
    lock, _ = load_lock(REPO / "runbooks" / example)
    extra = False
    for art in (lock.target, lock.draft):
        if art is None:
            continue
        w = art.weights  # the flags give bytes: parameters are bytes / 2 (BF16, F16)
        extra |= w.active_params is not None or w.total_params != w.weight_bytes // 2 or \
            any(dtype.startswith("F8") for dtype in w.params_by_dtype)
    assert extra == (example in STEP_FACTS_BEYOND_FLAGS)
