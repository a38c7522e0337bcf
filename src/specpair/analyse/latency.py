"""Break-even acceptance and expected speedup of a pair, from the calibrated step model.

Per decode step (see `specpair.analyse.stepmodel`): each forward costs a fixed part (per engine;
separately per draft forward and per speculative step) plus (T_mem³ + T_flops³)^(1/3) of
T_mem = bytes / (η_bw · BW) and T_flops = FLOPs / (η_f · peak), with the KV read and
attention FLOPs at the *expected* context (prompt plus half the output) and FP8
tensor-core FLOPs for FP8 weights. For batch B:

    T_decode = one target forward of 1 token per sequence           (no speculation)
    T_verify = one target forward of the verify width per sequence (+ per-step cost)
    T_draft  = autoregressive drafts (EAGLE, EAGLE3, MTP, STANDALONE): one draft
               forward per drafted step (a tree step carries topk tokens per sequence);
               block drafters (DFLASH, DSPARK): one draft forward over the whole block;
               NGRAM: nothing on the GPU.

    speedup S(τ, B) = τ · T_decode / (T_draft + T_verify)     τ = tokens per verify step,
    break-even τ*(B) = (T_draft + T_verify) / T_decode         bonus token included

(a per-output-token cost, where fitted, is paid per token with and without a draft: it
pulls S towards 1 but leaves τ* alone). With no fixed costs, memory-bound verify and
T_draft = γ·c·T_decode this is Leviathan et al.'s Theorem 3.8, S = E[tokens] / (γc + 1).

The parameters come from a fit per GPU family × engine on published measurements
(`data/calibration.yaml`), or from the pair's own bench records when it has them; every
output lists them and says where they came from. The curve and the verdict stop at the
concurrency the deployment can hold: the KV pool at the expected context, and its max
running requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from specpair.analyse.acceptance_tree import chain_tau
from specpair.analyse.calibrate import fit_pair
from specpair.analyse.step_inputs import (
    Parameters,
    _Setup,
    expected_context,
    published_parameters,
    setup_with,
)
from specpair.analyse.step_params import StepParams
from specpair.analyse.stepmodel import StepTimes, memo_step_times
from specpair.model.budget import Budget, Scenario
from specpair.model.common import Strict
from specpair.model.memo import value_memo
from specpair.resolve.pair import ResolvedPair

CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SLO_MARGIN = 0.10
"""The SLO must clear break-even by 10%: acceptance drifts with traffic."""


def leviathan_expected_tokens(alpha: float, gamma: int, decay: float = 1.0) -> float:
    """Expected tokens per iteration with γ drafts and i.i.d. acceptance α (Eq. 1); with
    `decay` δ < 1, the first drafted position at α and each later one at δ·α (the drafter
    family's `acceptance_fits.position_decay`, as `acceptance_tree.chain_tau`)."""
    if decay < 1.0:
        return chain_tau(alpha, gamma + 1, decay)
    if alpha >= 1.0:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def leviathan_speedup(alpha: float, gamma: int, c: float) -> float:
    """Walltime improvement of Theorem 3.8: E[tokens] / (γc + 1)."""
    return leviathan_expected_tokens(alpha, gamma) / (gamma * c + 1)


class Point(Strict):
    concurrency: int
    t_decode_s: float
    t_draft_s: float
    t_verify_s: float
    t_per_token_s: float = Field(description="per-output-token cost of one token per "
                                             "sequence; T_decode includes it once, a "
                                             "speculative step τ times")
    break_even: float = Field(description="τ*: tokens per verify step at which S = 1")
    break_even_range: tuple[float, float] = Field(description="τ*'s interval from the "
                                                  "cross-validated error (see uncertainty)")
    speedup_at_reference: float | None
    speedup_at_reference_range: tuple[float, float] | None = None
    speedup_at_slo: float
    speedup_at_slo_range: tuple[float, float]
    tpot_ms_at_slo: float = Field(description="time per output token at the SLO's τ")
    tpot_ms_at_slo_range: tuple[float, float]


class Uncertainty(Strict):
    """The cross-validated error band of this GPU family × engine × drafter family
    (ratio = predicted / published, 10th-90th percentile, leave-one-source-out)."""

    speedup_ratio: tuple[float, float]
    speedup_basis: str
    throughput_ratio: tuple[float, float]
    throughput_basis: str
    few_points: bool = Field(description="borrowed from a wider pool and widened")


class LatencyModel(Strict):
    method: str
    draft_passes: int
    tokens_per_draft_pass: int
    verify_width: int
    max_tokens_per_step: int
    reference: float | None
    slo: float
    concurrency: int = Field(description="the concurrency the headline is evaluated at: the "
                                         "runbook's, or what the deployment holds if less")
    requested_concurrency: int = Field(description="the runbook's expected concurrency")
    expected_context: int = Field(description="tokens in context per sequence while decoding")
    expected_context_source: str
    capacity: int = Field(description="most concurrent sequences the deployment holds at the "
                                      "expected context")
    capacity_reason: str
    at_concurrency: Point
    curve: list[Point] = Field(description="concurrencies up to the capacity")
    stops_paying_at_slo: int | None = Field(
        description="smallest concurrency at or above the headline's, within the capacity, "
                    "where τ* ≥ the SLO's acceptance (None: not within what the deployment "
                    "can run)")
    stops_paying_at_reference: int | None
    no_gain_at_slo: list[int] = Field(description="concurrencies of the curve where τ* ≥ SLO")
    slo_verdict: str
    slo_ok: bool
    slo_status: Literal["pass", "fail", "uncertain", "unreachable"] = Field(
        description="uncertain: the SLO lies inside τ*'s interval (measure)")
    hints: list[str]
    parameters: Parameters
    uncertainty: Uncertainty
    assumptions: list[str]


def _pool_tokens(scenario: Scenario) -> str:
    """The pool's tokens as the budget gives them: a capacity the engine measures at
    start-up (vLLM 0.34.0's measured mode) is an estimate with its interval."""
    if scenario.capacity_estimate is None:
        return f"{scenario.max_total_tokens:,} tokens"
    return (f"≈ {scenario.max_total_tokens:,} tokens, an estimate "
            f"({scenario.capacity_estimate}): the engine measures it at start-up")


def capacity(scenario: Scenario, context: int) -> tuple[int, str]:
    """Most sequences the deployment runs at once at the expected context."""
    by_kv = scenario.max_total_tokens // max(context, 1)
    limits = [(scenario.max_running_requests, "max running requests"),
              (by_kv, f"the KV pool ({_pool_tokens(scenario)}) at "
                      f"{context:,} tokens per sequence")]
    if scenario.state_slots is not None:
        limits.append((scenario.state_slots, "the linear-attention state slots"))
    n, reason = min(limits, key=lambda x: x[0])
    return max(n, 1), reason


def _times(s: _Setup, batch: int) -> StepTimes:
    return memo_step_times(s.target, s.draft, s.shape, batch, s.context, s.hw, s.params)


def _r(pair: tuple[float, float], digits: int = 4) -> tuple[float, float]:
    return round(pair[0], digits), round(pair[1], digits)


@value_memo  # a frozen setup, numbers; the gate's latency model of each candidate asks again
def point(s: _Setup, batch: int, reference: float | None, slo: float) -> Point:
    t = _times(s, batch)
    even = t.break_even()
    tpot = t.speculative(slo) / slo * 1e3
    # a speculative TPOT is off by both the step model's throughput error and its speedup
    # error; the speedup band is measured on exactly these speculative points
    return Point(concurrency=batch, t_decode_s=t.decode, t_draft_s=t.draft,
                 t_verify_s=t.verify, t_per_token_s=t.per_token,
                 break_even=round(even, 4),
                 break_even_range=_r(s.speedup_band.around_inverse(even)),
                 speedup_at_reference=round(t.speedup(reference), 4) if reference else None,
                 speedup_at_reference_range=_r(s.speedup_band.around(t.speedup(reference)))
                 if reference else None,
                 speedup_at_slo=round(t.speedup(slo), 4),
                 speedup_at_slo_range=_r(s.speedup_band.around(t.speedup(slo))),
                 tpot_ms_at_slo=round(tpot, 3),
                 tpot_ms_at_slo_range=_r(tpot_range(s, tpot), 3))


def tpot_range(s: _Setup, tpot_ms: float) -> tuple[float, float]:
    """TPOT's interval: the throughput band (inverse) widened by the speedup band."""
    lo, hi = s.throughput_band.around_inverse(tpot_ms)
    if s.shape.passes or s.shape.verify > 1:
        lo, hi = lo * s.speedup_band.ratio_lo, hi * s.speedup_band.ratio_hi
    return lo, hi


@dataclass(frozen=True)
class Estimate:
    """A predicted value with its cross-validated interval and where the band comes from."""

    value: float
    lo: float
    hi: float
    basis: str


def expected_speedup(pair: ResolvedPair, budget: Budget, concurrency: int,
                     tau: float | None = None) -> Estimate:
    """The expected speedup of the pair at `concurrency` sequences and acceptance `tau`
    (default: the SLO's), with its interval: the one function every output that states a
    speedup (verdict, plan, dashboard, site) should call."""
    s = setup(pair, budget)
    acc = pair.runbook.acceptance
    t = _times(s, concurrency)
    used = tau if tau is not None else acc.slo.min_length
    value = t.speedup(used)
    lo, hi = s.speedup_band.around(value)
    return Estimate(round(value, 4), round(lo, 4), round(hi, 4), s.speedup_band.label)


def parameters(pair: ResolvedPair, budget: Budget) -> Parameters:
    """The pair's own bench records when it has them, else the published fit."""
    if pair.measurement is not None:
        own = fit_pair(pair, budget, pair.measurement)
        if own is not None:
            return Parameters(values=own.params, source=own.provenance)
    return published_parameters(pair)


def setup(pair: ResolvedPair, budget: Budget, params: StepParams | None = None) -> _Setup:
    return setup_with(pair, budget, params or parameters(pair, budget).values)


@dataclass(frozen=True)
class SloCheck:
    """What the gate's SP701 reads of a latency model: its concurrency and SLO verdict.
    `slo_check` computes it without the curve, the assumptions and the pydantic model the
    planner's per-candidate gate run would otherwise build and never read."""
    concurrency: int
    slo_ok: bool
    slo_verdict: str


@dataclass(frozen=True)
class _Here:
    """`model`'s operating point and the inputs of its SLO verdict, shared by `model` and
    `slo_check` so that both state one verdict."""
    s: _Setup
    params: Parameters
    requested: int
    cap: int
    cap_reason: str
    here_c: int
    reference: float | None
    slo: float


def _here(pair: ResolvedPair, budget: Budget, known: _Setup | None = None) -> _Here:
    acc = pair.runbook.acceptance
    scenario = budget.speculative or budget.baseline
    requested = pair.runbook.deployment.concurrency or scenario.max_running_requests
    params = parameters(pair, budget)
    s = known if known is not None and known.params == params.values \
        else setup(pair, budget, params.values)
    cap, cap_reason = capacity(scenario, s.context)
    return _Here(s, params, requested, cap, cap_reason, min(requested, cap),
                 acc.reference.mean_length if acc.reference else None, acc.slo.min_length)


def _verdict(h: _Here, here: Point) -> tuple[Literal["pass", "fail", "uncertain",
                                                     "unreachable"], str]:
    """The SLO's status at the operating point and the sentence stating it."""
    s, slo, here_c = h.s, h.slo, h.here_c
    needed = here.break_even * (1 + SLO_MARGIN)
    even_lo, even_hi = here.break_even_range
    where = f"at concurrency {here_c}" + (
        f" (the runbook expects {h.requested}; the deployment holds {h.cap})"
        if h.requested > h.cap else "")
    band = f"τ* {here.break_even:.2f} [{even_lo:.2f}–{even_hi:.2f}]"
    lo_s, hi_s = here.speedup_at_slo_range
    if slo > s.shape.max_tokens:
        return "unreachable", (f"SLO {slo} exceeds the most tokens one step can yield "
                               f"({s.shape.max_tokens}): unreachable")
    if even_lo <= slo <= even_hi:
        return "uncertain", (
            f"uncertain: measure. SLO {slo} lies inside break-even {band} {where} "
            f"(the interval is the model's cross-validated error: "
            f"{s.speedup_band.label}); expected speedup at the SLO "
            f"{here.speedup_at_slo:.2f}× [{lo_s:.2f}–{hi_s:.2f}]")
    if slo >= needed:
        return "pass", (f"SLO {slo} clears break-even {band} (+10% → {needed:.2f}) {where}: "
                        f"expected speedup {here.speedup_at_slo:.2f}× [{lo_s:.2f}–{hi_s:.2f}] "
                        "at the SLO")
    return "fail", (f"SLO {slo} is below break-even {band} + 10% (= {needed:.2f}) {where}: "
                    "at that acceptance the pair is slower than the target alone")


def slo_check(pair: ResolvedPair, budget: Budget, known: _Setup | None = None) -> SloCheck:
    """`model(pair, budget)`'s concurrency, slo_ok and slo_verdict (the same calls up to
    the operating point, so the same refusals), without the rest of the model. `known`:
    a setup the caller holds that equals `setup(pair, budget, params)` for any `params`
    it was made with (used where those are the pair's own parameters)."""
    h = _here(pair, budget, known)
    status, verdict = _verdict(h, point(h.s, h.here_c, h.reference, h.slo))
    return SloCheck(h.here_c, status in ("pass", "uncertain"), verdict)


def model(pair: ResolvedPair, budget: Budget) -> LatencyModel:
    rb = pair.runbook
    h = _here(pair, budget)
    s, params, requested, cap, cap_reason, here_c = (h.s, h.params, h.requested, h.cap,
                                                     h.cap_reason, h.here_c)
    reference, slo = h.reference, h.slo
    context_source = expected_context(pair)[1]
    batches = sorted({b for b in CONCURRENCIES if b <= cap} | {here_c, cap})
    curve = [point(s, b, reference, slo) for b in batches]
    here = next(p for p in curve if p.concurrency == here_c)

    def stops(tau: float | None) -> int | None:
        if tau is None:
            return None
        return next((p.concurrency for p in curve
                     if p.concurrency >= here_c and p.break_even >= tau), None)

    needed = here.break_even * (1 + SLO_MARGIN)
    status, verdict = _verdict(h, here)
    hints: list[str] = []
    if status == "unreachable":
        hints.append(f"lower the SLO to at most {s.shape.max_tokens}, or lengthen the "
                     "block / the number of drafted tokens")
    elif status == "uncertain":
        hints.append("measure this pair at this concurrency (`specpair bench`, then "
                     "`specpair calibrate`): the model cannot tell pass from fail here")
    elif status == "fail":
        lower = [p for p in curve if p.concurrency < here_c
                 and p.break_even * (1 + SLO_MARGIN) <= slo]
        if lower and lower[-1].speedup_at_slo > here.speedup_at_slo:
            hints.append(f"lower concurrency to {lower[-1].concurrency} or less: there τ* = "
                         f"{lower[-1].break_even:.2f} and the speedup at the SLO is "
                         f"{lower[-1].speedup_at_slo:.2f}×")
        hints.append(f"raise the SLO to at least {needed:.2f} only if measured acceptance "
                     "supports it; otherwise a cheaper draft or a shorter block lowers τ*")
    ok = status in ("pass", "uncertain")
    if requested > cap:
        hints.append(f"the runbook expects {requested} concurrent sequences but the "
                     f"deployment holds {cap} ({cap_reason}): raise the KV budget or lower "
                     "the expected concurrency")
    gpu = pair.gpu_spec
    peak = ("FP8 " + f"{gpu.fp8_dense_flops / 1e12:g}") if s.target.fp8 and gpu.fp8_dense_flops \
        else f"BF16 {gpu.bf16_dense_flops / 1e12:g}"
    assumptions = [
        f"{gpu.name}: {gpu.bandwidth_basis}; {peak} TFLOP/s dense "
        f"(catalog: {gpu.source})",
        f"step-time parameters: {params.values.describe()} — {params.source}",
        f"KV read and attention FLOPs at the expected context of {s.context:,} tokens per "
        f"sequence ({context_source})",
        f"the curve stops at {cap} concurrent sequences: {cap_reason}",
        "a per-output-token cost is paid with and without a draft: it lowers the speedup "
        "at high concurrency but not τ*",
    ]
    assumptions.append(
        f"intervals: predicted / published ratios, 10th-90th percentile, leave-one-source-out"
        f" — speedup and τ*: {s.speedup_band.label}; throughput and TPOT: "
        f"{s.throughput_band.label}")
    assumptions += _layer_assumptions(pair, s)
    return LatencyModel(
        method=rb.speculation.method.value, draft_passes=s.shape.passes,
        tokens_per_draft_pass=s.shape.tokens_per_pass, verify_width=s.shape.verify,
        max_tokens_per_step=s.shape.max_tokens, reference=reference, slo=slo,
        concurrency=here_c, requested_concurrency=requested, expected_context=s.context,
        expected_context_source=context_source, capacity=cap, capacity_reason=cap_reason,
        at_concurrency=here, curve=curve,
        stops_paying_at_slo=stops(slo), stops_paying_at_reference=stops(reference),
        no_gain_at_slo=[p.concurrency for p in curve if p.break_even >= slo],
        slo_verdict=verdict, slo_ok=ok, slo_status=status, hints=hints, parameters=params,
        uncertainty=Uncertainty(
            speedup_ratio=(s.speedup_band.ratio_lo, s.speedup_band.ratio_hi),
            speedup_basis=s.speedup_band.label,
            throughput_ratio=(s.throughput_band.ratio_lo, s.throughput_band.ratio_hi),
            throughput_basis=s.throughput_band.label,
            few_points=s.speedup_band.few or s.throughput_band.few),
        assumptions=assumptions)


def _layer_assumptions(pair: ResolvedPair, s: _Setup) -> list[str]:
    """How the step model reads the models' layers: MoE routing where there are experts,
    then the layers it does not time (`untimed_layers`)."""
    lines = []
    if s.target.routed_bytes or (s.draft is not None and s.draft.routed_bytes):
        lines.append(
            "MoE: dense weights read every step; of the routed experts, the share the "
            "step's tokens touch, 1 − (1 − k/E)^N with N = sequences × w^ρ (the w verify "
            "tokens of one sequence share experts; ρ "
            f"{s.params.moe_locality:.2f} fitted, 1 = uniform routing)")
    return lines + untimed_layers(pair)


def untimed_layers(pair: ResolvedPair) -> list[str]:
    """What the step model does not time as the engine runs it, per model with such
    layers (issue 54: every latency output names what it cannot predict). It times
    attention FLOPs on the full-attention layers only and reads each KV-keeping layer's
    cache (the budget's bytes per token) over the whole expected context."""
    models = [("target", pair.target.geometry)]
    if pair.draft is not None and not pair.draft.bundled:
        models.append(("draft", pair.draft.geometry))
    lines = []
    for role, g in models:
        parts = []
        if g.sliding_window_layers:
            parts.append(f"{g.sliding_window_layers} sliding-window layers (window "
                         f"{g.sliding_window:,}) read their KV over the whole context and "
                         "add no attention FLOPs")
        if g.chunked_attention_layers:
            parts.append(f"{g.chunked_attention_layers} chunked-attention layers (chunk "
                         f"{g.attention_chunk_size:,}) read their KV over the whole context "
                         "and add no attention FLOPs")
        if g.linear_attention is not None:
            parts.append(f"{g.linear_attention.layers} linear-attention layers "
                         f"({g.linear_attention.kind}) count their weights only, not their "
                         "recurrent state's reads and FLOPs")
        if parts:
            lines.append(f"not timed as the engine runs them, in the {role}: "
                         + "; ".join(parts) + ". The step times, τ* and speedups are "
                         "unverified for these layers")
    return lines
