"""A pair with a derived speculation schedule is budgeted once (issue 55): the derivation
budgets the pair before its schedule exists, and the releases' `reschedule` turns that
budget into the scheduled pair's. Here the derived budget must be the one `compute`
makes of the scheduled pair, field for field and byte for byte, for every example and
for each release on schedules of every width (a schedule whose largest K is the static
one and one below it: SGLang sizes its pools for the schedule's largest candidate)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from specpair.analyse import budget as budget_module
from specpair.analyse.analysis import Analysis
from specpair.analyse.budget import compute, rescheduled
from specpair.analyse.schedule import resolve
from specpair.engines import registry
from specpair.model.budget import Budget
from specpair.resolve.pair import ResolvedPair
from tests.support.engine_verdicts import engine_answered
from tests.support.examples import example
from tests.support.geometries import dense
from tests.support.pairs import make_pair
from tests.support.paths import REPO

NAMES = sorted(p.parent.name for p in (REPO / "runbooks").glob("*/runbook.*"))


def same(derived: Budget, computed: Budget) -> None:
    assert derived == computed
    assert json.dumps(derived.model_dump(mode="json"), sort_keys=True) == \
        json.dumps(computed.model_dump(mode="json"), sort_keys=True)


def _scheduled(pair: ResolvedPair) -> tuple[ResolvedPair, Budget]:
    scheduled, before = resolve(pair)
    assert before is not None and scheduled.schedule is not None
    return scheduled, before


@pytest.mark.parametrize("name", NAMES)
def test_each_example_is_budgeted_once_and_as_computed(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    pair = example(name)

    original = budget_module.compute

    def counted(p: ResolvedPair) -> Budget:
        calls[p.name] += 1
        return original(p)

    monkeypatch.setattr(budget_module, "compute", counted)
    for module in ("specpair.analyse.schedule", "specpair.analyse.analysis"):
        monkeypatch.setattr(f"{module}.compute", counted)
    analysis = Analysis(pair)
    computed_once = analysis.budget
    assert calls[pair.name] == 1, calls
    monkeypatch.undo()
    same(computed_once, compute(analysis.pair))


RELEASES = [label for label in registry.labels()
            if registry.by_label(label).schedule_refusal is not None]


@pytest.mark.parametrize("label", RELEASES)
@pytest.mark.parametrize("k", [1, 3, 5])
def test_each_release_reschedules_as_it_budgets(label: str, k: int) -> None:
    engine, version = label.split()
    draft = dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle3"})
    pair = make_pair(dense(32), draft, engine=engine, version=version,
                     speculation={"method": "EAGLE3", "num_speculative_tokens": k,
                                  "schedule": "derived"},
                     deployment={"context_length": 4096, "max_running_requests": 64})
    scheduled, before = _scheduled(pair)
    hook = scheduled.release.reschedule
    assert hook is not None
    derived = hook(before, scheduled, scheduled.gpu_spec)
    fresh = compute(scheduled)
    if derived is not None:
        same(derived, fresh)
    same(rescheduled(before, scheduled), fresh)


def test_the_releases_derive_the_budget_rather_than_compute_it() -> None:
    """Not a vacuous equivalence: every example with a derived schedule is derived."""
    derived = []
    for name in NAMES:
        pair = example(name)
        if pair.runbook.speculation.schedule != "derived":
            continue
        scheduled, before = _scheduled(pair)
        hook = scheduled.release.reschedule
        assert hook is not None
        derived.append(hook(before, scheduled, scheduled.gpu_spec) is not None)
    assert derived and all(derived)


@pytest.mark.parametrize("label", RELEASES)
@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "DeciLMForCausalLM"])
def test_a_verdict_for_the_scheduled_pair_marks_its_derived_budget(
        label: str, architecture: str) -> None:
    """`specpair verify` asks the release about the scheduled pair (the analysis's pair
    and budget); the budget derived from the unscheduled one must carry that answer as
    `compute` of the scheduled pair does (stand-in answer: tests/support/engine_verdicts),
    for a verified architecture and for one the runbook declares unverified (whose
    notes a confirming answer replaces)."""
    engine, version = label.split()
    draft = dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle3"})
    target = dense(32).model_copy(update={"architecture": architecture})
    declared = [] if architecture == "LlamaForCausalLM" else [architecture]
    pair = make_pair(target, draft, engine=engine, version=version,
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 3,
                                  "schedule": "derived"},
                     deployment={"context_length": 4096, "max_running_requests": 64,
                                 "assumptions": {"unverified_layouts": declared}})
    scheduled, before = _scheduled(pair)
    answered = engine_answered(scheduled)
    derived = rescheduled(before, answered)
    assert derived.confirmed_by == f"engine {label}" and derived.engine_differs == []
    assert derived.unverified == []
    same(derived, compute(answered))
    differs = rescheduled(before, engine_answered(scheduled, differs=True))
    assert differs.confirmed_by is None and len(differs.engine_differs) == 1


@pytest.mark.parametrize("label", RELEASES)
@pytest.mark.parametrize("schedule", ["derived", "pinned"])
def test_a_refused_layout_under_a_schedule_is_budgeted_once_the_engine_answered(
        label: str, schedule: str) -> None:
    """A layout the allowlist refuses (an architecture the runbook does not declare) under
    a speculation schedule: `specpair verify` puts the scheduled pair to the release
    (`verify.budget_of`), and with that answer in the lock the build budgets the pair,
    confirmed (stand-in answer: tests/support/engine_verdicts). Before, verify asked the
    unscheduled pair's question, which the build never asks, so the pair stayed refused
    after `verify --record`. A differing answer, or none, leaves it refused."""
    from specpair.analyse.verify import budget_of
    from specpair.model.errors import SpecpairError

    engine, version = label.split()
    draft = dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle3"})
    target = dense(32).model_copy(update={"architecture": "DeciLMForCausalLM"})
    written: object = "derived" if schedule == "derived" else [
        {"start": 1, "end": 8, "k": 3}, {"start": 9, "end": 64, "k": 1}]
    pair = make_pair(target, draft, engine=engine, version=version,
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 3,
                                  "schedule": written},
                     deployment={"context_length": 4096, "max_running_requests": 64})
    with pytest.raises(SpecpairError, match="DeciLMForCausalLM"):
        _ = Analysis(pair).budget
    asked, _, refused = budget_of(pair)
    assert refused is not None and "DeciLMForCausalLM" in refused
    assert asked.schedule is not None, "verify asks the scheduled pair's question"
    verdict = engine_answered(asked).engine_verdict
    confirmed = Analysis(pair.model_copy(update={"engine_verdict": verdict}))
    assert confirmed.pair.schedule == asked.schedule
    assert confirmed.budget.confirmed_by == f"engine {label}"
    assert confirmed.budget.engine_differs == []
    differing = engine_answered(asked, differs=True).engine_verdict
    with pytest.raises(SpecpairError, match="DeciLMForCausalLM"):
        _ = Analysis(pair.model_copy(update={"engine_verdict": differing})).budget
