"""A lock's engine verdict in the build: a budget the release's own code confirmed says
so in every output, a differing answer fails the gate, an answer to another question
(the pair changed since) counts for nothing, and a layout the allowlist refuses is
budgeted once the engine confirmed it, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest

from specpair.analyse.budget import compute
from specpair.generate.budget_files import csv_rows, markdown
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair
from tests.support.engine_verdicts import engine_answered
from tests.support.geometries import dense
from tests.support.pairs import DRAFT, good, make_pair, with_runbook


def unverified_target() -> ResolvedPair:
    """An architecture no oracle verified (Nemotron-NAS's DeciLM class)."""
    pair = good()
    geometry = dense(36).model_copy(update={"architecture": "DeciLMForCausalLM"})
    return pair.model_copy(update={
        "target": pair.target.model_copy(update={"geometry": geometry})})


def test_a_confirmed_budget_says_so_in_its_outputs() -> None:
    pair = engine_answered(good())
    budget = compute(pair)
    assert budget.confirmed_by == f"engine {pair.engine}" and budget.engine_differs == []
    text = f"Confirmed by {pair.engine}'s code"
    assert text in markdown(pair, budget) and text in csv_rows(budget)
    assert compute(good()).confirmed_by is None  # no answer recorded: no claim


def test_an_answer_to_another_question_counts_for_nothing() -> None:
    answered = engine_answered(good())
    changed = with_runbook(answered, deployment={"context_length": 4096})
    assert changed.engine_verdict == answered.engine_verdict
    budget = compute(changed)
    assert budget.confirmed_by is None and budget.engine_differs == []


def test_a_differing_answer_is_reported_with_both_figures() -> None:
    budget = compute(engine_answered(good(), differs=True))
    assert budget.confirmed_by is None
    assert len(budget.engine_differs) == 1 and "engine" in budget.engine_differs[0]
    assert "Differs from the engine's code" in markdown(good(), budget)


def test_a_refused_layout_is_budgeted_once_the_engine_confirmed_it() -> None:
    with pytest.raises(SpecpairError, match="unverified_layouts"):
        compute(unverified_target())
    with pytest.raises(SpecpairError, match="unverified_layouts"):
        compute(engine_answered(unverified_target(), differs=True))
    budget = compute(engine_answered(unverified_target()))
    assert budget.confirmed_by is not None and budget.unverified == []


def test_a_budget_with_nothing_to_size_is_refused_before_any_engine_runs(
        tmp_path: Path) -> None:
    from specpair.analyse.verify import probe

    # the weights take the whole GPU: no rest for the engine's pool code to size
    pair = make_pair(dense(36), DRAFT, target_bytes=90 << 30)
    with pytest.raises(SpecpairError, match="nothing is left for the KV pools"):
        probe(pair, {"target": tmp_path, "draft": tmp_path})
