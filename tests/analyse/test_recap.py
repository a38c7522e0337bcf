"""A budget derived for another max_running_requests (`budget.recompute`, the releases'
`recap`) is the budget `compute` makes of that pair, field for field and byte for byte in
its dump. The planner budgets each candidate without a request cap and then with the
concurrency it chose, and derives the second from the first; here, for every example
runbook, every budget the plan derives is checked against the slow path, and so are
variants at request caps the plan never picks (1, a cap the pool cannot hold)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.analyse.analysis import Analysis
from specpair.analyse.budget import compute, recompute
from specpair.analyse.plan import planner as plan_module
from specpair.analyse.plan.variants import variant
from specpair.commands.build import load_pairs
from specpair.model.budget import Budget
from specpair.resolve.pair import ResolvedPair
from tests.support.paths import REPO

NAMES = sorted(p.parent.name for p in (REPO / "runbooks").glob("*/runbook.*"))


def example(name: str) -> ResolvedPair:
    (pair,) = load_pairs(REPO, [next((REPO / "runbooks" / name).glob("runbook.*"))])
    return pair


def same(derived: Budget, computed: Budget) -> None:
    assert derived == computed
    assert json.dumps(derived.model_dump(mode="json"), sort_keys=True) == \
        json.dumps(computed.model_dump(mode="json"), sort_keys=True)


@pytest.mark.parametrize("name", NAMES)
def test_every_budget_the_plan_derives_is_the_computed_one(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    derived: list[bool] = []

    def checked(near: Budget, pair: ResolvedPair) -> Budget:
        recap = pair.release.recap
        got = recap(near, pair, pair.gpu_spec) if recap is not None else None
        derived.append(got is not None)
        fresh = compute(pair)
        if got is not None:
            same(got, fresh)
        result = recompute(near, pair)
        same(result, fresh)
        return result

    monkeypatch.setattr(plan_module, "recompute", checked)
    analysis = Analysis(example(name))
    analysis.plan_search  # noqa: B018  (a cached property: runs the search)
    assert derived, "the plan derived no budget"


def test_both_engines_derive_most_budgets() -> None:
    """Not a vacuous equivalence: both engines' releases derive (return a budget) for
    examples that set a memory fraction and have no state pool, and refuse a hybrid."""
    kinds: dict[str, list[bool]] = {}
    for name in NAMES:
        pair = example(name)
        screen = variant(pair, {("deployment", "max_running_requests"): None})
        near = compute(screen)
        for cap in (1, 3, 17, 64, 10**6):
            final = variant(pair, {("deployment", "max_running_requests"): cap})
            recap = final.release.recap
            assert recap is not None
            got = recap(near, final, final.gpu_spec)
            fresh = compute(final)
            if got is not None:
                same(got, fresh)
            same(recompute(near, final), fresh)
            kinds.setdefault(pair.runbook.engine.name.value, []).append(got is not None)
    assert set(kinds) == {"sglang", "vllm"}
    assert all(kinds["vllm"])  # nothing of vLLM's pool but max_num_seqs' part reads it
    assert any(kinds["sglang"])


@pytest.mark.parametrize("name", NAMES)
def test_a_derived_budget_follows_every_field_the_cap_changes(name: str) -> None:
    """From a budget at one cap to another and back: the derivation starts from any
    budget of the pair, not only the uncapped one, and the default memory fraction (which
    SGLang sizes from the cap) makes its release refuse rather than guess."""
    pair = example(name)
    caps: list[dict[tuple[str, ...], Any]] = [
        {("deployment", "max_running_requests"): cap} for cap in (2, 40, 512)]
    if pair.runbook.deployment.memory_fraction is not None:
        caps += [{**c, ("deployment", "memory_fraction"): None} for c in caps]
    for a in caps:
        for b in caps:
            if {k: v for k, v in a.items() if k[1] != "max_running_requests"} != \
                    {k: v for k, v in b.items() if k[1] != "max_running_requests"}:
                continue
            first, second = variant(pair, a), variant(pair, b)
            same(recompute(compute(first), second), compute(second))


@pytest.mark.parametrize("name", NAMES)
def test_the_gate_reuses_only_a_setup_equal_to_the_final_variants(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner's gate run of a candidate reads the latency setup of its screening
    variant (`Planner._same_setup`) in place of the final variant's: for every candidate of
    every example it equals the setup made afresh, and the SLO verdict is the one
    `slo_check` makes without it."""
    from specpair.analyse import latency

    reused: list[bool] = []
    original = latency.slo_check

    def checked(pair: ResolvedPair, budget: Budget, known: Any = None) -> Any:
        got = original(pair, budget, known)
        assert got == original(pair, budget)
        if known is not None:
            params = latency.parameters(pair, budget).values
            if known.params == params:
                assert known == latency.setup(pair, budget, params)
                reused.append(True)
        return got

    monkeypatch.setattr(plan_module, "slo_check", checked)
    Analysis(example(name)).plan_search  # noqa: B018  (a cached property: runs the search)
    assert reused, "the gate reused no setup"
