"""Acceptance length as a function of draft depth: τ(d) = 1 + Σ_{k≤d} p_k.

p_k is the probability that the first k drafted tokens of a step are all accepted (the
bonus token makes the 1). Two sources give it:

- measured: vLLM's per-position counters, recorded by `specpair bench`
  (`vllm:spec_decode_num_accepted_tokens_per_pos_total` over
  `vllm:spec_decode_num_drafts_total`); known up to the depth that was measured and not
  extrapolated past it;
- one published or required τ at one depth: the first drafted position accepted at α and
  each later one at δ·α, α solved from τ = 1 + α · Σ_{j<d} (δα)^j, so p_k = α (δα)^{k−1}.
  δ is the drafter family's fitted per-position decay (`acceptance_fits.position_decay`: the
  same δ the calibration points' anchored sweeps use, so runbooks and validation extrapolate
  depth with one model); δ = 1 (families outside `acceptance_fits.FEATURE_DRIFT_FAMILIES`, or no
  method given) is Leviathan et al.'s Eq. 1, (1 − α^{d+1}) / (1 − α). An SGLang tree of
  top-k branches verifying num_draft_tokens − 1 nodes is carried with
  `acceptance_tree.tree_tau`: the same α and δ, its lower-ranked candidates at the fitted
  sibling ratio ρ (`acceptance_fits.sibling_acceptance`), the verified nodes the top-N by score
  as SGLang's organize_draft_results picks them, so a deeper tree under the same node
  budget saturates as the calibration points' anchored tree sweeps do. A vLLM token tree
  (a fixed topology) is carried as the chain of its depth.

Depth is what bounds a step's tokens: γ for a chain, num_steps for a tree, the block for
a block drafter (DSPARK's block is γ; DFLASH verifies its block including the bonus
token, so depth = block − 1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specpair.analyse.acceptance_fits import position_decay, sibling_acceptance
from specpair.analyse.acceptance_tree import tree_acceptance_rate, tree_tau
from specpair.analyse.step_inputs import draft_shape
from specpair.analyse.stepmodel import drafter_family
from specpair.bench.acceptance import measured_acceptance
from specpair.bench.record import Measurement
from specpair.resolve.pair import ResolvedPair


@dataclass(frozen=True)
class AcceptanceCurve:
    """τ by depth, from per-position rates (measured) or α at the first position and δ·α
    at each later one (one τ)."""

    source: str
    rates: tuple[float, ...] = ()   # measured p_1..p_n; empty for a geometric curve
    alpha: float | None = None
    measured: bool = False
    decay: float = 1.0              # δ: a later position's acceptance over the first's
    topk: int = 1                   # an SGLang tree's branching (1: a chain)
    draft_tokens: int | None = None  # the tree's verify width (num_draft_tokens)
    sibling: float = 0.0            # ρ: a rank-r candidate's acceptance over rank r − 1's

    def tau(self, depth: int) -> float | None:
        """Tokens per verify step at this depth, bonus included; None past the measured
        depth (no extrapolation)."""
        if depth < 0:
            raise ValueError(f"depth {depth} < 0")
        if self.measured:
            if depth > len(self.rates):
                return None
            return 1.0 + sum(self.rates[:depth])
        assert self.alpha is not None
        return tree_tau(self.alpha, depth + 1, self.decay, self.topk, self.draft_tokens,
                        self.sibling)


def solve_alpha(tau: float, depth: int, decay: float = 1.0, topk: int = 1,
                draft_tokens: int | None = None, sibling: float = 0.0) -> float:
    """The first-position acceptance α at which `depth` drafts, later positions at δ·α
    (δ = `decay`), a tree's lower ranks at ρ (`sibling`), yield `tau` tokens per step."""
    if depth <= 0:
        return 1.0
    return tree_acceptance_rate(tau, depth + 1, decay, topk, draft_tokens, sibling)


def from_tau(tau: float, depth: int, source: str, method: str | None = None,
             topk: int = 1, draft_tokens: int | None = None) -> AcceptanceCurve:
    """The curve through one τ at one depth; with the speculative `method`, later
    positions decay by its drafter family's fitted δ (as the calibration points' do); an
    SGLang tree (`topk` > 1, `draft_tokens` verified) keeps its width and node budget at
    every depth, its lower ranks at the fitted ρ."""
    decay = position_decay(drafter_family(method)) if method is not None else 1.0
    sibling = sibling_acceptance() if topk > 1 else 0.0
    if depth > 0 and tau >= tree_tau(1.0, depth + 1, decay, topk, draft_tokens, sibling):
        # τ beyond what δ allows at this depth: constant acceptance, as the anchored
        # calibration sweeps do
        decay = 1.0
    alpha = solve_alpha(tau, depth, decay, topk, draft_tokens, sibling)
    how = (f"α {alpha:.3f} at the first position, δ·α at later ones (δ = {decay:.3f}, "
           f"{drafter_family(method or '')} family, fitted on published τ-by-depth sweeps)"
           if decay < 1.0 else f"i.i.d. α {alpha:.3f}")
    if topk > 1:
        how += (f"; top-{topk} tree verifying {(draft_tokens or depth + 1) - 1} nodes, rank "
                f"r ≥ 2 at ρ {sibling:.3f} × rank r − 1 (fitted on published tree shapes)")
    return AcceptanceCurve(source=f"{source}: τ {tau:g} at depth {depth} → {how}",
                           alpha=alpha, decay=decay, topk=topk, draft_tokens=draft_tokens,
                           sibling=sibling)


def tree_of(pair: ResolvedPair) -> tuple[int, int | None]:
    """(top-k, verify width) the runbook's τ is carried with: its tree's own where the
    release verifies the score-ranked top of its tree (`score_ranked_tree`), a chain's
    (1, None) otherwise (as `acceptance_fits.tree_topk` does for the calibration points)."""
    spec = pair.runbook.speculation
    if "score_ranked_tree" in pair.release.profile.capabilities and spec.topk > 1:
        return spec.topk, spec.num_draft_tokens
    return 1, None


def measured_curve(record: Measurement) -> AcceptanceCurve | None:
    """The record's per-position acceptance as a curve (None: SGLang, or an old record)."""
    found = measured_acceptance(record)
    if found is None:
        return None
    return AcceptanceCurve(
        source=f"measured per position by `specpair bench` ({found.record}, "
               f"{len(found.cells)} run(s) of {', '.join(found.workloads)} at concurrency "
               f"{', '.join(map(str, found.concurrencies))}, {found.drafts:,.0f} draft steps, "
               f"depth {found.num_speculative_tokens})",
        rates=found.rates, measured=True)


def record_mismatch(pair: ResolvedPair) -> str:
    """Why the latest bench record does not describe this pair's draft ('' if it does)."""
    record = pair.measurement
    assert record is not None
    spec = record.protocol.speculation
    if spec.get("method") != pair.runbook.speculation.method.value:
        return (f"it measured {spec.get('method')}, the runbook runs "
                f"{pair.runbook.speculation.method.value}")
    for role in ("target", "draft"):
        art = getattr(pair, role)
        measured = getattr(record.protocol, role)
        if art is None or measured is None:
            continue
        for key in ("repo", "path", "revision"):
            if measured.get(key) != getattr(art.source, key):
                return (f"it measured {role} {key} {measured.get(key)!r}, the lock has "
                        f"{getattr(art.source, key)!r}")
    return ""


def shape_depth(pair: ResolvedPair) -> int:
    """Depth of the runbook's own shape: the most draft tokens one step can accept."""
    return draft_shape(pair).max_tokens - 1


def by_depth(pair: ResolvedPair) -> tuple[AcceptanceCurve, AcceptanceCurve]:
    """(expected acceptance by depth, the SLO carried to each depth): the pair's own
    per-position measurement when its latest record describes this draft, else the
    runbook's reference τ at its depth, else the SLO itself. The planner and the schedule
    derivation read acceptance through this one function."""
    acc = pair.runbook.acceptance
    depth = shape_depth(pair)
    # one τ carried to other depths with the drafter family's per-position decay δ, the
    # same acceptance-by-depth model the calibration points are predicted with
    method = pair.runbook.speculation.method.value
    topk, width = tree_of(pair)
    slo_curve = from_tau(acc.slo.min_length, depth, "the SLO", method, topk, width)
    measured, stale = None, ""
    if pair.measurement is not None:
        stale = record_mismatch(pair)
        measured = None if stale else measured_curve(pair.measurement)
    if measured is not None:
        curve = measured
    elif acc.reference is not None:
        curve = from_tau(acc.reference.mean_length, depth,
                         f"the runbook's reference ({acc.reference.source})", method,
                         topk, width)
    else:
        curve = replace(slo_curve, source="no reference or measurement: the SLO itself ("
                        + slo_curve.source + ")")
    if stale:
        curve = replace(curve, source=f"{curve.source}; the latest bench record is not "
                                      f"used: {stale}")
    return curve, slo_curve
