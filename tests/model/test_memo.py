"""The value memos (`specpair.model.memo`) change no result: a plan made after other pairs'
plans filled them is the plan made with every memo empty, for pairs that differ in one
input each (the SLO, the request cap, the memory fraction, the KV dtype, the TP size).
A memo keyed on a subset of what its function reads would hand the second pair the
first one's answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.analyse.budget import compute
from specpair.analyse.latency import model
from specpair.analyse.plan.search import plan
from specpair.analyse.plan.variants import variant
from specpair.commands.build import load_pairs
from specpair.engines.vllm_0_33_0.budget import RULES
from specpair.model import memo
from specpair.model.common import KVDtype
from specpair.model.geometry import Geometry
from specpair.resolve.pair import ResolvedPair
from tests.support.paths import REPO


def example(name: str) -> ResolvedPair:
    (pair,) = load_pairs(REPO, [next((REPO / "runbooks" / name).glob("runbook.*"))])
    return pair


def variants(pair: ResolvedPair) -> list[ResolvedPair]:
    dep = pair.runbook.deployment
    slo = pair.runbook.acceptance.slo.min_length
    fraction = dep.memory_fraction or 0.9
    kv = "fp8_e4m3" if dep.kv_cache_dtype is KVDtype.AUTO else "auto"
    changes: list[dict[tuple[str, ...], Any]] = [
        {},
        {("acceptance", "slo", "min_length"): round(slo + 0.25, 2)},
        {("deployment", "max_running_requests"): (dep.max_running_requests or 64) + 7},
        {("deployment", "memory_fraction"): round(fraction - 0.03, 2)},
        {("deployment", "kv_cache_dtype"): kv},
        {("deployment", "parallel", "tensor"): dep.parallel.tensor * 2},
    ]
    return [variant(pair, c) for c in changes]


def result(pair: ResolvedPair) -> str:
    """The pair's plan and its own latency model (every point of its curve)."""
    budget = compute(pair)
    return json.dumps([plan(pair).model_dump(mode="json", exclude={"seconds",
                                                                   "ms_per_candidate"}),
                       model(pair, budget).model_dump(mode="json")], sort_keys=True)


@pytest.mark.parametrize("name", ["llama33-70b-eagle3-vllm", "qwen3-8b-dflash",
                                  "ling-3-flash-dspark"])
def test_memos_other_pairs_left_change_no_result(name: str) -> None:
    pairs = variants(example(name))
    memo.clear()
    shared = [result(p) for p in pairs]
    alone = []
    for p in pairs:
        memo.clear()
        alone.append(result(p))
    assert shared == alone
    assert len(set(alone)) == len(alone), "each changed input changes the plan"


def test_a_geometry_hashes_as_it_compares() -> None:
    """Geometry hashes a few fields (`Geometry.__hash__`); equality, and so every memo
    keyed on a geometry, still tells apart geometries that differ elsewhere."""
    g = example("llama33-70b-eagle3-vllm").target.geometry
    same = Geometry.model_validate(g.model_dump())
    assert same == g and hash(same) == hash(g)
    wider = g.model_copy(update={"v_head_dim": g.v_head_dim * 2})  # not a hashed field
    assert hash(wider) == hash(g) and wider != g
    memo.clear()
    plans = [RULES._layers_plan(x, None, 8, 1, 8, 16, KVDtype.AUTO, KVDtype.AUTO, True, None)
             for x in (g, wider)]
    assert plans[0][2] * 2 > plans[1][2] > plans[0][2], "the wider value heads take more KV"


def test_equal_geometries_are_one_object_and_unequal_ones_stay_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairs that load one model share its geometry object (pair._interned), so the
    memos' keys compare by identity; a geometry that hashes the same but differs in a field
    keeps its own object and value, and loading without the interned ones gives equal
    geometries."""
    from specpair.resolve import pair

    first, again = example("qwen3-8b-dflash"), example("qwen3-8b-dflash")
    assert first.target.geometry is again.target.geometry
    assert first.draft is not None and again.draft is not None
    assert first.draft.geometry is again.draft.geometry
    g = first.target.geometry
    other = Geometry.model_validate({**g.model_dump(), "vocab_size": g.vocab_size + 1})
    assert hash(other) == hash(g) and other != g
    assert pair._interned(other) is other
    assert pair._interned(other).vocab_size == g.vocab_size + 1
    monkeypatch.setattr(pair, "_GEOMETRIES", {})
    fresh = example("qwen3-8b-dflash")
    assert fresh.target.geometry == g and fresh.target.geometry is not g
