"""The step model's parameters fitted on the published points, per GPU family × engine
under their physical bounds (per-draft-forward costs per drafter family), with an
engine's fit pooled across GPU families for a family with too few points, and the check
that no stored fit sits outside a bound, or on one without a written reason.

The alternatives scored by leave-one-source-out and not adopted (other MoE terms, source
weights, the held-out set fitted in) are in site/docs/latency-model-notes.md."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from specpair.analyse.acceptance_fits import FEATURE_DRIFT_FAMILIES, fit_position_decay
from specpair.analyse.calibration_data import POOLED, CalibrationData, Fitted, family_of
from specpair.analyse.point_prediction import (
    baseline_ratio,
    hardware_of,
    predict_setup,
    setup,
)
from specpair.analyse.published_points import Point
from specpair.analyse.step_params import BOUNDS, DRAFT_BOUNDS, StepParams, fit_bounded
from specpair.analyse.step_priors import DRAFT_PRIORS, MEASURED, SHARED, UNCALIBRATED


def identifiable(points: Sequence[Point], data: CalibrationData) -> list[str]:
    """The parameters these points can pin down; the others keep their priors (no tensor
    parallelism: no all-reduce cost; one concurrency: no per-token cost; no speculative
    point with τ: no per-step or per-draft cost; no MoE verify: no routing locality); a
    parameter measured on every GPU family of the points (`MEASURED`) is taken as measured."""
    spec = [p for p in points if p.method is not None and p.tau is not None]
    free = ["eta_bw", "eta_flops", "forward_s"]
    if spec:
        free.append("speculative_s")
    if any(p.tp > 1 for p in points):
        free.append("allreduce_s")
    if any(max(p.tp, p.draft_tp or 1) > 1 and hardware_of(p.gpu, p.gpu_p2p).host_staged
           for p in points):
        # the host-staged link's measured figure is another machine's: what this one's
        # staging reaches of it is fitted on the points that cross it (and, held out with
        # their source, is the measured figure itself when they are predicted)
        free.append("host_link")
    if len({p.concurrency for p in points}) > 1:
        free.append("token_s")
    if len({data.models[p.target].layers for p in points}) > 1:
        free.append("layer_s")  # models of different depths tell it from forward_s
    if any(data.models[p.target].experts for p in spec):
        free.append("moe_locality")
    if any(p.input_len and p.output_len and p.concurrency > 1 for p in points):
        free.append("eta_prefill")  # prompts ride along only where others decode
    if any(data.models[p.target].experts for p in points):
        free.append("moe_bw")
    free += [f"draft_s.{d}" for d in sorted({p.drafter for p in spec})]
    # a parameter measured on every family these points come from is taken as measured
    families = {family_of(p.gpu) for p in points}
    return [n for n in free if n not in MEASURED or not families <= set(MEASURED[n].families)]


def _start(fits_prior: StepParams = UNCALIBRATED) -> dict[str, float]:
    out = {n: float(getattr(fits_prior, n)) for n in SHARED}
    out.update({f"draft_s.{d}": v for d, v in DRAFT_PRIORS.items()})
    return out


def _params(values: Mapping[str, float], drafter: str) -> StepParams:
    shared = {n: values[n] for n in SHARED}
    return StepParams(draft_s=values.get(f"draft_s.{drafter}", UNCALIBRATED.draft_s),
                      **shared)


def fit_group(points: Sequence[Point], data: CalibrationData) -> tuple[dict[str, float],
                                                                       list[str],
                                                                       dict[str, str]]:
    """Fit one GPU family × engine (or, given the points of several families, an engine's
    pooled fit): log residuals of every published throughput (or a speedup given alone),
    each source weighted 1/√(its points) so one long sweep does not outvote the other
    sources."""
    per_source: dict[str, int] = {}
    for p in points:
        per_source[p.source_key] = per_source.get(p.source_key, 0) + 1
    free = identifiable(points, data)

    drafters = sorted({pt.drafter for pt in points})

    # what no parameter changes, derived once: the fit evaluates every point thousands
    # of times
    prepared = [(pt, setup(pt, data), pt.drafter, 1 / math.sqrt(per_source[pt.source_key]))
                for pt in points]

    def residuals(values: Mapping[str, float]) -> list[float]:
        out: list[float] = []
        params = {d: _params(values, d) for d in drafters}
        for pt, ready, drafter, w in prepared:
            pred = predict_setup(ready, params[drafter])
            base = baseline_ratio(pt, pred)
            if base is not None:
                out.append(w * math.log(base))
            if pred.speedup is None:
                continue
            if pt.speculative_tok_s and pred.speculative_tok_s:
                out.append(w * math.log(pred.speculative_tok_s / pt.speculative_tok_s))
            elif pt.speedup:
                out.append(w * math.log(pred.speedup / pt.speedup))
        return out

    result = fit_bounded(residuals, _start(), free)
    return result.values, free, result.at_bound


MIN_FIT_POINTS = 3
"""Fewest points with a published throughput (or a speedup with its τ) a GPU family ×
engine needs for a fit of its own; with fewer it gets the engine's fit pooled across GPU
families (`POOLED`), and says so. An engine needs as many for its pooled fit; without one
a family falls back to the uncalibrated defaults, said so."""


def _informative(points: Iterable[Point]) -> list[Point]:
    return [p for p in points if p.baseline_tok_s or p.baseline_tpot_ms or (
        p.tau is not None and p.method is not None and p.published_speedup)]


def _fitted(family: str, engine: Literal["vllm", "sglang"], points: Sequence[Point],
            data: CalibrationData) -> Fitted:
    values, free, at = fit_group(points, data)
    drafts = {n.split(".", 1)[1]: values[n] for n in free if n.startswith("draft_s.")}
    return Fitted(family=family, engine=engine,
                  params=_params(values, "none"), draft_s=drafts, free=free,
                  at_bound=dict(sorted(at.items())),  # as data/calibration.yaml has it
                  fitted_on=[p.id for p in points],
                  pooled_from=sorted({family_of(p.gpu) for p in points})
                  if family == POOLED else [])


def refit(data: CalibrationData, exclude_source: str | None = None,
          reuse: Sequence[Fitted] = ()) -> list[Fitted]:
    """Per engine: a fit pooled across every GPU family's points, then each GPU family ×
    engine with enough points fitted on its own points (leaving out one source's points
    when cross-validating: the pool too is refitted without them). `role` is kept in the
    files for history only: the reported accuracy is leave-one-source-out, which holds
    out whole sources, not points of runs that are also fitted."""
    Engine = Literal["vllm", "sglang"]
    groups: dict[tuple[str, Engine], list[Point]] = {}
    engines: dict[Engine, list[Point]] = {}
    for pt in data.points:
        if pt.source_key != exclude_source and pt.refusal is None:
            groups.setdefault((family_of(pt.gpu), pt.engine), []).append(pt)
            engines.setdefault(pt.engine, []).append(pt)
    out: list[Fitted] = []
    for engine, points in sorted(engines.items()):
        if len(_informative(points)) < MIN_FIT_POINTS:
            continue
        ids = [p.id for p in points]
        same = next((f for f in reuse if (f.family, f.engine) == (POOLED, engine)
                     and f.fitted_on == ids), None)
        out.append(same if same is not None else _fitted(POOLED, engine, points, data))
    for (family, engine), points in sorted(groups.items()):
        if len(_informative(points)) < MIN_FIT_POINTS:
            continue  # a fit of priors alone would pass for a calibration: the pool's
        same = next((f for f in reuse if (f.family, f.engine) == (family, engine)
                     and f.fitted_on == [p.id for p in points]), None)
        if same is not None:  # the source left out has no point here: same fit
            out.append(same)
            continue
        out.append(_fitted(family, engine, points, data))
    return out


def bound_problems(data: CalibrationData) -> list[str]:
    """Stored fits outside their bounds, or on one without a written reason."""
    out = []
    on_a_bound: set[str] = set()
    for f in data.fitted:
        values = {n: float(getattr(f.params, n)) for n in SHARED}
        values.update({f"draft_s.{d}": v for d, v in f.draft_s.items()})
        on_bound = dict(f.at_bound)
        for name, v in values.items():
            b = BOUNDS[name] if name in BOUNDS else DRAFT_BOUNDS[name.split(".", 1)[1]]
            if not b.lo * 0.999 <= v <= b.hi * 1.001:
                out.append(f"{f.family} × {f.engine}: {name} = {v:g} outside "
                           f"[{b.lo:g}, {b.hi:g}]")
            span = 0.005 * math.log(b.hi / b.lo)
            if name in f.free and math.log(v / b.lo) <= span:
                on_bound.setdefault(name, "lower")
            elif name in f.free and math.log(b.hi / v) <= span:
                on_bound.setdefault(name, "upper")
        for name, side in sorted(on_bound.items()):
            key = f"{f.family} × {f.engine}: {name}"
            on_a_bound.add(key)
            if not data.bound_reasons.get(key, "").strip():
                out.append(f"{key} is on its {side} bound without a written reason "
                           "(data/calibration.yaml bound_reasons)")
    for drafter in FEATURE_DRIFT_FAMILIES:  # δ is fitted from the points, not stored
        fit = fit_position_decay(data.points, drafter)
        if fit.at_bound is not None:
            key = f"acceptance × {drafter}: position_decay"
            on_a_bound.add(key)
            if not data.bound_reasons.get(key, "").strip():
                out.append(f"{key} is on its {fit.at_bound} bound without a written "
                           "reason (data/calibration.yaml bound_reasons)")
    # a reason for a parameter a refit moved off its bound would explain what is not so
    out += [f"{key}: a written reason, but the stored fit is not on a bound (remove it "
            "from data/calibration.yaml bound_reasons)"
            for key in sorted(set(data.bound_reasons) - on_a_bound)]
    return out
