"""Every published point predicted as a row: with the fits made without its source when
cross-validating, a sweep without a published τ anchored on its first point (the τ at
which the model reproduces its published speedup, carried to the sweep's other points by
the acceptance-tree model)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from specpair.analyse.acceptance_fits import (
    fit_position_decay,
    fit_sibling_acceptance,
    tree_topk,
)
from specpair.analyse.acceptance_tree import tree_acceptance_rate, tree_tau
from specpair.analyse.calibrated_params import pick_fit
from specpair.analyse.calibration_data import CalibrationData, Fitted, family_of
from specpair.analyse.evaluation import Row
from specpair.analyse.point_prediction import (
    baseline_ratio,
    predict,
    speculative_times,
    times_at,
)
from specpair.analyse.published_points import Point
from specpair.analyse.step_params import StepParams
from specpair.analyse.step_priors import UNCALIBRATED


def _anchor_tau(point: Point, published: float, params: StepParams,
                data: CalibrationData) -> float:
    """The τ at which the model reproduces a published speedup (sweeps without τ)."""
    t = times_at(point, params, data)
    st = speculative_times(point, params, data, t)
    # S = (b·τ / (T_draft + T_verify + τ·P)) / (B / T_decode), b the speculative batch
    share = point.speculative_batch / point.batch
    room = share * t.decode - published * (st.per_token + st.prefill_per_token)
    return published * (st.draft + st.verify) / room if room > 0 else math.inf


def _max_speedup(point: Point, params: StepParams, data: CalibrationData) -> float:
    """The model's speedup at full acceptance (every drafted token accepted)."""
    return predict(point, params, data, float(point.shape.max_tokens)).speedup or 0.0


def _shape_text(p: Point) -> str:
    if p.method is None:
        return "baseline only"
    if p.num_steps is not None:
        return f"{p.method} {p.num_steps}/{p.topk}/{p.num_draft_tokens}"
    if p.block_size is not None:
        return f"{p.method} block {p.block_size}"
    return f"{p.method} k={p.num_speculative_tokens}"


def _fit_label(fits: Sequence[Fitted], family: str, engine: str) -> tuple[StepParams, str,
                                                                          Fitted | None]:
    f, _ = pick_fit(fits, family, engine)
    if f is None:
        return UNCALIBRATED, "uncalibrated", None
    return f.params, f"{f.family} × {engine}", f


def predict_rows(points: Sequence[Point], data: CalibrationData,
                 fits_for: Mapping[str, Sequence[Fitted]] | None,
                 default_fits: Sequence[Fitted],
                 decay_points: Sequence[Point] | None = None) -> list[Row]:
    """Rows for `points`; each point's fits are `fits_for[its source]` when given (the fits
    made without its source), else `default_fits`. An anchored depth sweep's δ is fitted
    on `decay_points` (default: `data.points`), without the point's source when
    `fits_for` is given."""
    decay_points = data.points if decay_points is None else decay_points
    points = [p for p in points if p.refusal is None]  # refused by name: no number
    # sweep → its first point's τ and per-token acceptance α (None: the model cannot
    # reach that point's speedup even at full acceptance, so α is unknown)
    anchors: dict[str, tuple[float, float | None, float, float]] = {}
    decays: dict[tuple[str, str | None], float] = {}
    siblings: dict[str | None, float] = {}
    unreachable: set[str] = set()
    rows: list[Row] = []
    for pt in sorted(points, key=lambda p: (p.sweep or p.id, p.concurrency, p.depth, p.id)):
        fits = fits_for[pt.source_key] if fits_for is not None else default_fits
        family = family_of(pt.gpu)
        _, label, f = _fit_label(fits, family, pt.engine)
        params = f.for_drafter(pt.drafter) if f is not None else UNCALIBRATED
        published = pt.published_speedup
        tau = None
        if pt.tau is None and pt.sweep and published is not None and pt.method:
            n = pt.shape.max_tokens
            if pt.sweep not in anchors:  # the sweep's first point anchors its acceptance
                first = _anchor_tau(pt, published, params, data)
                # δ of the drafter family, fitted without the point's source when
                # cross-validating (the same leave-one-source-out as the step fits)
                held_out = pt.source_key if fits_for is not None else None
                if (pt.drafter, held_out) not in decays:
                    decays[(pt.drafter, held_out)] = fit_position_decay(
                        decay_points, pt.drafter, held_out).decay
                decay = decays[(pt.drafter, held_out)]
                # ρ of a tree's lower-ranked candidates, held out by source as δ is
                if held_out not in siblings:
                    siblings[held_out] = fit_sibling_acceptance(decay_points, held_out).sibling
                sibling = siblings[held_out]
                topk = tree_topk(pt)
                if first >= tree_tau(1.0, n, decay, topk, pt.num_draft_tokens, sibling):
                    decay = 1.0  # τ beyond what δ allows at this depth: constant acceptance
                # no τ beyond the most tokens a step yields: a published speedup the model
                # cannot reach at full acceptance is said so, not bent into an impossible τ
                anchors[pt.sweep] = (first, tree_acceptance_rate(
                    first, n, decay, topk, pt.num_draft_tokens, sibling) if first < n
                    else None, decay, sibling)
            first, alpha, decay, sibling = anchors[pt.sweep]
            if alpha is None:  # unknown acceptance: the anchor's τ, capped
                tau = min(first, float(n))
                if first > n:  # this point's published speedup needs more than n tokens
                    unreachable.add(pt.id)
            else:
                # the same acceptance α at every point, later positions at δ·α: τ grows
                # with a deeper draft as the family's published sweeps show (a
                # concurrency sweep keeps its τ)
                # a tree's τ from the same α over its own depth, width and node budget
                tau = tree_tau(alpha, n, decay, tree_topk(pt), pt.num_draft_tokens, sibling)
        pred = predict(pt, params, data, tau)
        ratio = pred.speedup / published if pred.speedup and published else None
        rows.append(Row(
            id=pt.id, role=pt.role, source=pt.source_key, gpu=pt.gpu, family=family,
            engine=f"{pt.engine} {pt.engine_version}", drafter=pt.drafter,
            target=pt.target, draft=pt.draft, shape=_shape_text(pt), depth=pt.depth,
            concurrency=pt.concurrency, tau=pred.tau_used, tau_anchored=pred.tau_anchored,
            published_speedup=published, predicted_speedup=pred.speedup, ratio=ratio,
            published_baseline=pt.baseline_tok_s, predicted_baseline=pred.baseline_tok_s,
            baseline_ratio=baseline_ratio(pt, pred), params=label,
            beyond_full_acceptance=pt.id in unreachable or (
                published is not None and pt.method is not None
                and _max_speedup(pt, params, data) < published)))
    return rows
