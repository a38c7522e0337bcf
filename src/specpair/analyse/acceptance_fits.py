"""The acceptance parameters fitted on the published points: δ, a drafter family's decay
of acceptance with the draft position (from depth sweeps), and ρ, a tree's lower-ranked
candidates' acceptance relative to their higher-ranked sibling's (from SGLang tree
shapes). One of each, shared by the planner and the calibration points' anchored sweeps."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from specpair.analyse.acceptance_tree import (
    acceptance_rate,
    chain_tau,
    tree_acceptance_rate,
    tree_tau,
)
from specpair.analyse.calibration_data import load
from specpair.analyse.published_points import Point
from specpair.analyse.step_params import Bound
from specpair.model.memo import value_memo


def _minimum(cost: Callable[[float], float], lo: float, hi: float, cells: int) -> float:
    """The argument in [lo, hi] of `cost`'s least value, to 3 decimals: the best point of
    a grid of `cells` cells (a one-parameter cost may have several dips), then a
    golden-section refinement inside the cells beside it."""
    grid = [lo + (hi - lo) * i / cells for i in range(cells + 1)]
    best = min(range(cells + 1), key=lambda i: (cost(grid[i]), i))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, cells)]
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = b - golden * (b - a), a + golden * (b - a)
        a, b = (a, d) if cost(c) <= cost(d) else (c, b)
    return round((a + b) / 2, 3)


DECAY_BOUND = Bound(0.4, 1.0, "δ: acceptance of a drafted position after the first, "
                    "relative to the first's. A chain drafter's first position reads the "
                    "target's own features; later ones read the drafter's estimates of "
                    "them (EAGLE, Li et al. 2024, section 5: 0-α above n-α), so a later "
                    "position is accepted no more often than the first (δ ≤ 1, "
                    "Leviathan's constant acceptance); below 0.4 a drafter's later "
                    "positions would add less than the published depth sweeps show")

FEATURE_DRIFT_FAMILIES = ("eagle", "mtp")
"""Drafter families whose later positions read their own estimates of the target's
features, trained only on the target's (EAGLE-1/2; an MTP/NextN layer trained for one
position and chained). EAGLE-3's training-time test trains every position on the
drafter's own estimates, and a separate draft model reads only tokens, so those keep
Leviathan's constant acceptance (δ = 1). Fitted on their depth sweeps δ would be 0.93
(EAGLE-3) and 0.98 (draft model): within what one acceptance rate per sweep already
misses, and the EAGLE-3 value moves the gpt-oss chain sweep's best depth two steps from
the published one."""


@dataclass(frozen=True)
class PositionDecay:
    """The fitted δ of one drafter family and the depth sweeps it was fitted on."""

    drafter: str
    decay: float
    sweeps: tuple[str, ...]
    at_bound: str | None


def _decay_sweeps(points: Iterable[Point], drafter: str) -> list[list[Point]]:
    """Depth sweeps of chains (top-k 1) of `drafter` with a published τ at each of ≥ 2
    depths: the data that shows how τ grows with depth."""
    by: dict[str, list[Point]] = {}
    for p in points:
        if p.sweep and p.method and p.drafter == drafter and p.topk == 1:
            by.setdefault(p.sweep, []).append(p)
    out = []
    for _, members in sorted(by.items()):
        if len({p.concurrency for p in members}) == 1 and len({p.depth for p in members}) > 1 \
                and all(p.tau is not None for p in members):
            out.append(sorted(members, key=lambda p: p.depth))
    return out


def fit_position_decay(points: Sequence[Point], drafter: str,
                       exclude_source: str | None = None) -> PositionDecay:
    """δ of `drafter`, fitted on every source's published τ-by-depth sweeps (one δ per
    drafter family, never per source): each sweep's shallowest point fixes its α, as an
    anchored sweep's does, and δ minimises the log error of the deeper points' τ (each
    source weighted 1/√(its points), as the step fit does). Without such sweeps, and for
    families outside `FEATURE_DRIFT_FAMILIES`, δ = 1."""
    if drafter not in FEATURE_DRIFT_FAMILIES:
        return PositionDecay(drafter, 1.0, (), None)
    sweeps = _decay_sweeps((p for p in points if p.source_key != exclude_source), drafter)
    if not sweeps:
        return PositionDecay(drafter, 1.0, (), None)
    per_source: dict[str, int] = {}
    for sw in sweeps:
        per_source[sw[0].source_key] = per_source.get(sw[0].source_key, 0) + len(sw) - 1

    def cost(decay: float) -> float:
        total = 0.0
        for sw in sweeps:
            w = 1 / per_source[sw[0].source_key]
            alpha = acceptance_rate(sw[0].tau or 1.0, sw[0].shape.max_tokens, decay)
            for p in sw[1:]:
                total += w * math.log(chain_tau(alpha, p.shape.max_tokens, decay)
                                      / (p.tau or 1.0)) ** 2
        return total

    lo, hi = DECAY_BOUND.lo, DECAY_BOUND.hi
    value = _minimum(cost, lo, hi, 60)
    side = "lower" if value <= lo * 1.005 else ("upper" if value >= hi * 0.995 else None)
    return PositionDecay(drafter, min(hi, max(lo, value)), tuple(s[0].sweep or "" for s in sweeps),
                         side)


@cache
def position_decay(drafter: str) -> float:
    """δ of a drafter family, fitted on the stored published points (`load()`): the one δ
    the planner's depth extrapolation and the calibration points' anchored sweeps share."""
    return fit_position_decay(load().points, drafter).decay


SIBLING_BOUND = Bound(0.0, 1.0, "ρ: a tree's rank-r draft candidate (r ≥ 2) is the target's "
                      "token ρ times as often as its rank r − 1 sibling. The draft ranks its "
                      "candidates by its own probability, taken to order them as acceptance "
                      "does (EAGLE-2, Li et al. 2024, section 3), so a lower rank is accepted "
                      "no more often (ρ ≤ 1); ρ = 0 is a chain's acceptance at every width")


@dataclass(frozen=True)
class SiblingAcceptance:
    """The fitted ρ and the tree-shape groups (source, concurrency) it was fitted on."""

    sibling: float
    groups: tuple[str, ...]
    at_bound: str | None


def tree_topk(p: Point) -> int:
    """The top-k `tree_tau` expands for a point: its own where the engine verifies the
    top-N of its tree by score (`score_ranked_tree`: SGLang); 1 otherwise (vLLM's
    speculative_token_tree is a fixed topology the points do not publish: carried as the
    chain of its depth, as before the tree model)."""
    return p.topk if _score_ranked_tree(p.engine) else 1


def _score_ranked_tree(engine: str) -> bool:
    from specpair.engines.registry import every_release_has

    return every_release_has(engine, "score_ranked_tree")


def _tree_groups(points: Iterable[Point]) -> list[list[Point]]:
    """Draft shapes measured by one source with one pair, workload and concurrency, each
    with a published τ, at least one of them a tree (top-k > 1): the data that shows how τ
    moves with a tree's depth, width and node budget."""
    by: dict[tuple[str, str, str | None, str | None, int], list[Point]] = {}
    for p in points:
        if p.method and p.tau is not None and p.num_steps is not None \
                and _score_ranked_tree(p.engine):
            key = (p.source_key, p.target, p.draft, p.workload, p.concurrency)
            by.setdefault(key, []).append(p)
    out = []
    for _, members in sorted(by.items(), key=lambda kv: tuple(map(str, kv[0]))):
        shapes = {(p.num_steps, p.topk, p.num_draft_tokens) for p in members}
        if len(shapes) > 1 and any(p.topk > 1 for p in members) \
                and len({p.drafter for p in members}) == 1:
            out.append(sorted(members, key=lambda p: (p.depth, p.topk, p.num_draft_tokens or 0,
                                                      p.id)))
    return out


def fit_sibling_acceptance(points: Sequence[Point],
                           exclude_source: str | None = None) -> SiblingAcceptance:
    """ρ, fitted on every source's published τ across SGLang tree shapes (one ρ for every drafter
    family: the published tree shapes are EAGLE-3's): each group's shallowest, narrowest
    shape fixes its α, as an anchored sweep's first point does, and ρ minimises the log
    error of the other shapes' τ (each source's terms weighted as δ's fit weighs them).
    Without such groups ρ = 0: every tree carried as the chain of its depth, as before
    the tree model."""
    return _fit_sibling_acceptance(tuple(points), exclude_source)


@value_memo  # frozen points: the site's live evaluation and the planner fit the same ρ
def _fit_sibling_acceptance(points: tuple[Point, ...],
                            exclude_source: str | None) -> SiblingAcceptance:
    groups = _tree_groups(p for p in points if p.source_key != exclude_source)
    if not groups:
        return SiblingAcceptance(0.0, (), None)
    per_source: dict[str, int] = {}
    for g in groups:
        per_source[g[0].source_key] = per_source.get(g[0].source_key, 0) + len(g) - 1
    decay = {g[0].drafter: fit_position_decay(points, g[0].drafter, exclude_source).decay
             for g in groups}

    def tau_of(p: Point, alpha: float, sibling: float) -> float:
        return tree_tau(alpha, p.shape.max_tokens, decay[p.drafter], tree_topk(p),
                        p.num_draft_tokens, sibling)

    def cost(sibling: float) -> float:
        total = 0.0
        for g in groups:
            w = 1 / per_source[g[0].source_key]
            a = g[0]
            alpha = tree_acceptance_rate(a.tau or 1.0, a.shape.max_tokens, decay[a.drafter],
                                         tree_topk(a), a.num_draft_tokens, sibling)
            for p in g[1:]:
                total += w * math.log(tau_of(p, alpha, sibling) / (p.tau or 1.0)) ** 2
        return total

    lo, hi = SIBLING_BOUND.lo, SIBLING_BOUND.hi
    value = _minimum(cost, lo, hi, 50)
    side = "lower" if value <= lo + 0.005 else ("upper" if value >= hi - 0.005 else None)
    names = tuple(f"{g[0].source_key} c{g[0].concurrency}" for g in groups)
    return SiblingAcceptance(min(hi, max(lo, value)), names, side)


@cache
def sibling_acceptance() -> float:
    """ρ fitted on the stored published points (`load()`): the one ρ the planner's tree
    depths and the calibration points' anchored tree sweeps share."""
    return fit_sibling_acceptance(load().points).sibling
