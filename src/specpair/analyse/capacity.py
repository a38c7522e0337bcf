"""One replica's token capacity at the live acceptance length, and the replicas demand needs.

A replica that runs B sequences at once yields B·τ tokens per speculative step, and the
step costs T_draft + T_verify + τ·T_per_token (`stepmodel.StepTimes.speculative`, the
step times of the latency model's point at the deployment's concurrency), so it serves

    capacity(τ) = B·τ / (T_draft + T_verify + τ·T_per_token)   tokens per second,

B·1000 / TPOT(τ): the same step times as the verdict's TPOT at the SLO, which it equals at
τ = SLO, and B / T_decode (the target alone) at τ = τ*. A drop in acceptance lowers it, so
demand over it rises and the autoscaler adds replicas before latency breaks.

The recording rule evaluates it as chords between knots computed here (every half token,
or a tenth of the range where that is wider, from 1 to the most tokens a step yields, plus
the SLO, the reference τ and τ*), at the live 5-minute τ; the chords lie under the concave
curve, by at most `Capacity.chord_gap`, so the rule errs towards more replicas. Its
interval is the TPOT's (`latency.tpot_range`: the throughput band widened by the speedup
band), recorded as separate series (`bound="lower"`, `"upper"`). A replica that reports no
τ (idle, or generating without drafting) counts at the target alone's capacity, B /
T_decode with the throughput band.

Demand is the pair's served token rate (the engine's generated-tokens counter); the
replicas it needs are demand / (target utilization × the mean capacity of its replicas),
per bound. The generated KEDA ScaledObject scales on the runbook's bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from specpair.analyse.alerts import BY, PAIR_LABEL, selector
from specpair.analyse.latency import LatencyModel, setup, tpot_range
from specpair.analyse.monitoring import EngineMetrics, for_engine
from specpair.analyse.stepmodel import StepTimes
from specpair.model.budget import Budget
from specpair.resolve.pair import ResolvedPair

WINDOW = "5m"
TAU = f"specpair:acceptance_length:rate{WINDOW}"
CAPACITY = f"specpair:replica_token_capacity:rate{WINDOW}"
DEMAND = f"specpair:token_demand:rate{WINDOW}"
REPLICAS = f"specpair:desired_replicas:rate{WINDOW}"
BOUNDS = ("model", "lower", "upper")
KNOT_STEP = 0.5
"""τ between knots, at least: the chords of the examples lie within 1% of the curve."""
SEGMENTS = 10
"""At most this many grid segments (a deep block drafter's τ range gets wider ones)."""


@dataclass(frozen=True)
class Knot:
    tau: float
    model: float
    lower: float
    upper: float

    def at(self, bound: str) -> float:
        return {"model": self.model, "lower": self.lower, "upper": self.upper}[bound]


@dataclass(frozen=True)
class Capacity:
    concurrency: int
    knots: tuple[Knot, ...]
    alone: Knot
    """The target alone (no τ): B / T_decode and the throughput band; `tau` 1."""
    chord_gap: float
    """The largest share by which a chord lies under the curve between two knots."""
    parameters: str
    band: str
    unverified: str | None
    """Why the step model is unverified for this pair (no published points of its drafter
    family on this GPU family and engine: a prior and a borrowed, widened band)."""


def _knot_taus(latency: LatencyModel) -> list[float]:
    top = latency.max_tokens_per_step
    step = max(KNOT_STEP, math.ceil((top - 1) / SEGMENTS / KNOT_STEP) * KNOT_STEP)
    grid = [1 + step * i for i in range(int((top - 1) / step) + 1)]
    marks = [latency.slo, latency.reference, latency.at_concurrency.break_even]
    return sorted({round(t, 4) for t in [*grid, float(top), *marks]
                   if t is not None and 1 <= t <= top})


def omitted(latency: LatencyModel | None, not_modelled: str | None) -> str | None:
    """Why a pair gets no capacity records (None where it gets them): the step model does
    not represent the deployment, the deployment holds no running request (its weights
    leave no KV cache: the gate's SP601), or the step times are not finite positive
    numbers, so no capacity is a number to scale on."""
    if latency is None:
        return f"they need the step model, and the latency is {not_modelled}"
    p = latency.at_concurrency
    if p.concurrency < 1:
        return "the deployment holds no running request (budget.md; the gate's SP601)"
    times = (p.t_decode_s, p.t_draft_s + p.t_verify_s, p.t_per_token_s)
    if not all(math.isfinite(t) for t in times) or min(times[:2]) <= 0:
        return "the step model gives no finite, positive step time for this deployment"
    return None


def compute(pair: ResolvedPair, budget: Budget, latency: LatencyModel) -> Capacity:
    """The capacity curve at the latency model's operating point (its concurrency), for a
    deployment `omitted` has no reason to leave out."""
    s = setup(pair, budget, latency.parameters.values)
    p = latency.at_concurrency
    t = StepTimes(p.t_decode_s, p.t_draft_s, p.t_verify_s, p.t_per_token_s)
    b = p.concurrency

    def rate(tau: float) -> float:
        return b * tau / t.speculative(tau)

    def knot(tau: float) -> Knot:
        tpot_ms = t.speculative(tau) / tau * 1e3
        lo, hi = tpot_range(s, tpot_ms)
        return Knot(tau, b * 1e3 / tpot_ms, b * 1e3 / hi, b * 1e3 / lo)

    def chord_gap(a: Knot, z: Knot, share: float) -> float:
        return 1 - (a.model + (z.model - a.model) * share) / rate(a.tau + (z.tau - a.tau) * share)

    knots = tuple(knot(tau) for tau in _knot_taus(latency))
    gap = max((chord_gap(a, z, i / 16) for a, z in pairwise(knots) for i in range(1, 16)),
              default=0.0)
    decode_ms = t.decode * 1e3
    lo, hi = s.throughput_band.around_inverse(decode_ms)
    alone = Knot(1.0, b * 1e3 / decode_ms, b * 1e3 / hi, b * 1e3 / lo)
    u = latency.uncertainty
    unverified = u.speedup_basis if u.few_points else None
    return Capacity(b, knots, alone, max(gap, 0.0), latency.parameters.source,
                    f"speedup {u.speedup_basis}; throughput {u.throughput_basis}", unverified)


def capacity_expr(metrics: EngineMetrics, pair: str, cap: Capacity, bound: str) -> str:
    """Chords between the knots at the 5-minute τ, the end knots' values past them, and
    the target alone's capacity for a replica that reports no τ."""
    tau = f"{TAU}{selector(pair)}"
    first, last = cap.knots[0], cap.knots[-1]
    parts = [f"({tau} <= {first.tau:g}) * 0 + {first.at(bound):.6g}"]
    for a, b in pairwise(cap.knots):
        slope = (b.at(bound) - a.at(bound)) / (b.tau - a.tau)
        parts.append(f"({a.at(bound):.6g} + ({tau} - {a.tau:g}) * {slope:.6g}) "
                     f"and on({BY}) (({tau} > {a.tau:g}) <= {b.tau:g})")
    parts.append(f"({tau} > {last.tau:g}) * 0 + {last.at(bound):.6g}")
    served = f"sum by ({BY}) (rate({metrics.generated_tokens}{selector(pair)}[{WINDOW}]))"
    parts.append(f"({served} * 0 + {cap.alone.at(bound):.6g}) unless on({BY}) {tau}")
    return "\nor\n".join(parts)


def records(pair: ResolvedPair, cap: Capacity) -> list[dict[str, Any]]:
    """Capacity per replica by bound, the pair's demand, and (with an autoscaler) the
    replicas that demand needs by bound."""
    metrics = for_engine(pair.engine, pair.source_file)
    name = pair.name
    s = selector(name)
    step_model = "unverified" if cap.unverified else "fitted"
    out: list[dict[str, Any]] = [
        {"record": CAPACITY, "expr": capacity_expr(metrics, name, cap, bound),
         "labels": {"bound": bound, "step_model": step_model}} for bound in BOUNDS]
    out.append({"record": DEMAND, "expr": f"sum by ({PAIR_LABEL}) "
                f"(rate({metrics.generated_tokens}{s}[{WINDOW}]))"})
    auto = pair.runbook.deployment.autoscaling
    if auto is not None:
        for bound in BOUNDS:
            of_bound = selector(name, f'bound="{bound}"')
            out.append({"record": REPLICAS,
                        "expr": f"{DEMAND}{s} / on({PAIR_LABEL}) (avg by ({PAIR_LABEL}) "
                                f"({CAPACITY}{of_bound}) * {auto.target_utilization:g})",
                        "labels": {"bound": bound}})
    return out


def group(pair: ResolvedPair, cap: Capacity) -> dict[str, Any]:
    return {"name": f"specpair-{pair.name}-capacity", "rules": records(pair, cap)}


def notes(pair: ResolvedPair, cap: Capacity | None, why_omitted: str | None) -> list[str]:
    """What the rule file says of the capacity records, the autoscaler and their basis
    (`why_omitted`: `omitted`'s reason where `cap` is None)."""
    if cap is None:
        return [f"Omitted, the capacity records and the autoscaler: {why_omitted}."]
    b = cap.concurrency
    lines = [
        f"Capacity: {CAPACITY} is one replica's tokens/s at concurrency {b} and the live "
        f"{WINDOW} τ, B·τ / (T_draft + T_verify + τ·T_per_token) of the step model, as "
        f"chords between τ = " + ", ".join(f"{k.tau:g}" for k in cap.knots)
        + f" ({cap.knots[0].model:.0f} to {cap.knots[-1].model:.0f} tokens/s; the chords lie "
        f"at most {cap.chord_gap:.2%} under the curve); bound lower/upper: its interval "
        f"({cap.band}). A replica without a τ counts at the target alone's "
        f"{cap.alone.model:.0f} tokens/s [{cap.alone.lower:.0f}–{cap.alone.upper:.0f}].",
        f"Step costs: {cap.parameters}."]
    if cap.unverified:
        lines.append(f"Unverified step model: no published points of this drafter family "
                     f"here (its speedup interval: {cap.unverified}); the capacity and the "
                     "replica counts are a prior's until `specpair bench` and `specpair "
                     "calibrate` measure this pair (its series carry "
                     "step_model=\"unverified\").")
    auto = pair.runbook.deployment.autoscaling
    if auto is None:
        lines.append("No autoscaler (deployment.autoscaling is null).")
    else:
        lines.append(
            f"Autoscaling: {REPLICAS} = {DEMAND} / ({auto.target_utilization:g} × the mean "
            f"capacity of the pair's replicas), by bound; the KEDA ScaledObject in "
            f"autoscaling.k8s.yaml scales on bound=\"{auto.capacity_bound}\" between "
            f"{auto.min_replicas} and {auto.max_replicas} replicas.")
    return lines
