"""The two-model memory budget, computed through the engine release's own rules.

One calculator per (engine, version); each follows that release's start-up order and
formulas and names them in every line it produces. The design sketch put pool math under
`engines/`; it lives here (and launch commands under `specpair.launch`) so that
`engines/` stays the small, import-cheap registry of names and method spellings that the
loader needs, while the heavier per-release modules load only when used.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from specpair import registry
from specpair.budget import sglang_0_5_23, vllm_0_33_0
from specpair.budget.common import check_tensor_parallel
from specpair.budget.model import Budget
from specpair.errors import Problem, SpecpairError
from specpair.hardware import GPU
from specpair.resolve import ResolvedPair

CALCULATORS: dict[str, Callable[[ResolvedPair, GPU], Budget]] = {
    sglang_0_5_23.ENGINE: sglang_0_5_23.budget,
    vllm_0_33_0.ENGINE: vllm_0_33_0.budget,
}


_CACHE: dict[int, tuple[weakref.ref[ResolvedPair], Budget]] = {}


def check_layouts(pair: ResolvedPair) -> list[str]:
    """The allowlist: refuses layouts the oracle has not verified for this engine release,
    unless the runbook declares them; returns the declared ones' notes."""
    from specpair.runbooks import load_location  # positions for the build's errors

    refused, notes = registry.check(pair.engine, registry.pair_models(pair),
                                    pair.runbook.deployment.assumptions.unverified_layouts)
    if refused:
        where = load_location(pair.source_file, "deployment.assumptions.unverified_layouts")
        raise SpecpairError([Problem(where, u.message, u.hint) for u in refused])
    return notes


def compute(pair: ResolvedPair) -> Budget:
    """The pair's budget; computed once per pair object (several generators need it)."""
    cached = _CACHE.get(id(pair))
    if cached is not None and cached[0]() is pair:
        return cached[1]
    draft_tp = pair.runbook.deployment.parallel.draft_tensor
    check_tensor_parallel(pair, draft_tp)
    notes = check_layouts(pair)
    budget = CALCULATORS[pair.engine](pair, pair.gpu_spec)
    if notes:
        budget = budget.model_copy(update={"unverified": notes})
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[id(pair)] = (weakref.ref(pair), budget)
    return budget
