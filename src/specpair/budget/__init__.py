"""The two-model memory budget, computed through the engine release's own rules.

One calculator per (engine, version), in that release's package
(`specpair.engines.<release>.budget`); each follows the release's start-up order and
formulas and names them in every line it produces.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from specpair import registry
from specpair.budget.common import check_tensor_parallel
from specpair.budget.model import Budget
from specpair.errors import Problem, SpecpairError
from specpair.schema.common import Method

if TYPE_CHECKING:  # annotations only: resolve imports the engine releases, which import this
    from specpair.resolve import ResolvedPair

_CACHE: dict[int, tuple[weakref.ref[ResolvedPair], Budget]] = {}


def check_layouts(pair: ResolvedPair) -> list[str]:
    """The allowlist: refuses layouts the oracle has not verified for this engine release,
    unless the runbook declares them; returns the declared ones' notes."""
    models = [("target", pair.target.geometry)]
    if pair.draft is not None and pair.runbook.speculation.method is not Method.NGRAM:
        models.append(("draft", pair.draft.geometry))
    refused, notes = registry.check(pair.engine, models,
                                    pair.runbook.deployment.assumptions.unverified_layouts)
    if refused:
        where = pair.location("deployment.assumptions.unverified_layouts")
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
    budget = pair.release.budget(pair, pair.gpu_spec)
    if notes:
        budget = budget.model_copy(update={"unverified": notes})
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[id(pair)] = (weakref.ref(pair), budget)
    return budget
