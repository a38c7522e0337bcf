"""Break-even acceptance and expected speedup of a pair, from the calibrated step model.

Per decode step (see `specpair.stepmodel`): each forward costs a fixed part (per engine;
separately per draft forward and per speculative step) plus max(bytes / (η_bw · BW),
FLOPs / (η_f · peak)), with the KV read and attention FLOPs at the *expected* context
(prompt plus half the output) and FP8 tensor-core FLOPs for FP8 weights. For batch B:

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
from functools import cache

from pydantic import Field

from specpair import calibration
from specpair.bench.workloads import generate
from specpair.budget.model import Budget, Scenario
from specpair.resolve import ResolvedArtifact, ResolvedPair
from specpair.schema.common import Method, Strict
from specpair.schema.runbook import Workload
from specpair.stepmodel import Forward, Hardware, Shape, StepParams, StepTimes, step_times

CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SLO_MARGIN = 0.10
"""The SLO must clear break-even by 10%: acceptance drifts with traffic."""
CHARS_PER_TOKEN = 4
"""Prompt tokens of the synthetic workloads, estimated from their characters (no
tokenizer is loaded to build outputs)."""
FP8_DTYPES = ("F8_E4M3", "F8_E5M2", "F8_E4M3FN", "FP8")


def leviathan_expected_tokens(alpha: float, gamma: int) -> float:
    """Expected tokens per iteration with γ drafts and i.i.d. acceptance α (Eq. 1)."""
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
    speedup_at_reference: float | None
    speedup_at_slo: float


class Parameters(Strict):
    values: StepParams
    source: str = Field(description="where the values come from")


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
    hints: list[str]
    parameters: Parameters
    assumptions: list[str]


def draft_shape(pair: ResolvedPair) -> Shape:
    spec = pair.runbook.speculation
    return calibration.shape_for(spec.method.value, spec.num_speculative_tokens,
                                 spec.block_size, spec.num_steps, spec.topk,
                                 spec.num_draft_tokens)


def _is_fp8(art: ResolvedArtifact) -> bool:
    by_dtype = art.weights.params_by_dtype
    fp8 = sum(n for d, n in by_dtype.items() if d.upper() in FP8_DTYPES)
    return fp8 * 2 > sum(by_dtype.values())


def _attention_flops(art: ResolvedArtifact, shards: int) -> float:
    """FLOPs per token and per token of context: QKᵀ and AV over the full-attention
    layers (MLA absorbed: scores and values on the latent)."""
    g = art.geometry
    if g.attention == "mla" and g.kv_lora_rank:
        per_head = 2 * g.kv_lora_rank + (g.qk_rope_head_dim or 0)
    else:
        per_head = g.head_dim + g.v_head_dim
    return 2 * g.num_attention_heads * per_head * g.full_attention_layers / shards


def _forward(art: ResolvedArtifact, weight_bytes: int, active_params: int, shards: int,
             kv: int, tp: int) -> Forward:
    """A model's per-rank forward: dense weights always read, routed experts by coverage.

    With the expert layout in the geometry the routed part is exact (E experts of known
    size, top-k); without it a MoE falls back to its active fraction of all weights."""
    total = art.weights.total_params or 1
    per_param = weight_bytes / total
    moe = art.geometry.moe
    flops = 2 * active_params / shards
    common = {"attention_flops_per_context_token": _attention_flops(art, shards),
              "allreduces": calibration.TP_ALLREDUCES_PER_LAYER
              * art.geometry.num_hidden_layers if tp > 1 else 0,
              "fp8": _is_fp8(art)}
    if moe is not None and moe.routed_params < total:
        routed = moe.routed_params * per_param
        return Forward((weight_bytes - routed) / shards, flops, kv, routed / shards,
                       moe.active_experts / moe.experts, **common)  # type: ignore[arg-type]
    fraction = art.weights.active_fraction
    if fraction < 1.0:
        return Forward(0.0, flops, kv, weight_bytes / shards, fraction,
                       **common)  # type: ignore[arg-type]
    return Forward(weight_bytes / shards, flops, kv, **common)  # type: ignore[arg-type]


def forwards(pair: ResolvedPair, budget: Budget) -> tuple[Forward, Forward | None]:
    dep = pair.runbook.deployment
    tp, pp = dep.parallel.tensor, dep.parallel.pipeline
    spec_scn = budget.speculative or budget.baseline
    target = _forward(pair.target, pair.target_own_weight_bytes, pair.target_own_active_params,
                      tp * pp, spec_scn.cell_target, tp)
    if pair.draft is None or pair.runbook.speculation.method is Method.NGRAM:
        return target, None
    d_w = pair.draft.weights
    d_tp = dep.parallel.draft_tensor or tp
    draft = _forward(pair.draft, d_w.weight_bytes, d_w.active_params or d_w.total_params,
                     d_tp, spec_scn.cell_draft, d_tp)
    return target, draft


@cache  # a frozen Workload hashes by value; its prompts are generated, not read
def workload_context(w: Workload) -> float:
    """Mean prompt tokens (≈4 characters per token) plus half the output of one workload."""
    prompts = generate(w)
    return sum(len(r.prompt) for r in prompts) / len(prompts) / CHARS_PER_TOKEN \
        + w.max_tokens / 2


def expected_context(pair: ResolvedPair) -> tuple[int, str]:
    """Tokens in context per sequence while decoding: the declared mean, else the mean over
    the runbook's workloads of (prompt + half the output)."""
    dep = pair.runbook.deployment
    if dep.mean_context is not None:
        return min(dep.mean_context, dep.context_length), "declared (deployment.mean_context)"
    per_workload = [workload_context(w) for w in pair.runbook.workloads]
    mean = max(1, round(sum(per_workload) / len(per_workload)))
    return min(mean, dep.context_length), (
        "mean over the runbook's workloads of prompt (≈4 characters per token) + half of "
        "max_tokens: " + ", ".join(w.name for w in pair.runbook.workloads))


def capacity(scenario: Scenario, context: int) -> tuple[int, str]:
    """Most sequences the deployment runs at once at the expected context."""
    by_kv = scenario.max_total_tokens // max(context, 1)
    limits = [(scenario.max_running_requests, "max running requests"),
              (by_kv, f"the KV pool ({scenario.max_total_tokens:,} tokens) at "
                      f"{context:,} tokens per sequence")]
    if scenario.state_slots is not None:
        limits.append((scenario.state_slots, "the linear-attention state slots"))
    n, reason = min(limits, key=lambda x: x[0])
    return max(n, 1), reason


@dataclass(frozen=True)
class _Setup:
    target: Forward
    draft: Forward | None
    shape: Shape
    context: int
    hw: Hardware
    params: StepParams


def _times(s: _Setup, batch: int) -> StepTimes:
    return step_times(s.target, s.draft, s.shape, batch, s.context, s.hw, s.params)


def point(s: _Setup, batch: int, reference: float | None, slo: float) -> Point:
    t = _times(s, batch)
    return Point(concurrency=batch, t_decode_s=t.decode, t_draft_s=t.draft,
                 t_verify_s=t.verify, t_per_token_s=t.per_token,
                 break_even=round(t.break_even(), 4),
                 speedup_at_reference=round(t.speedup(reference), 4) if reference else None,
                 speedup_at_slo=round(t.speedup(slo), 4))


def parameters(pair: ResolvedPair, budget: Budget) -> Parameters:
    """The pair's own bench records when it has them, else the published fit."""
    if pair.measurement is not None:
        from specpair.calibrate import fit_pair

        own = fit_pair(pair, budget, pair.measurement)
        if own is not None:
            return Parameters(values=own.params, source=own.provenance)
    gpu = pair.gpu_spec
    chosen = calibration.params_for(gpu.family, pair.runbook.engine.name.value)
    return Parameters(values=chosen.params, source=chosen.provenance)


def setup(pair: ResolvedPair, budget: Budget, params: StepParams | None = None) -> _Setup:
    gpu = pair.gpu_spec
    target, draft = forwards(pair, budget)
    context, _ = expected_context(pair)
    return _Setup(target, draft, draft_shape(pair), context,
                  Hardware(gpu.bandwidth_bytes_per_s, gpu.bf16_dense_flops,
                           gpu.fp8_dense_flops),
                  params or parameters(pair, budget).values)


def model(pair: ResolvedPair, budget: Budget) -> LatencyModel:
    rb = pair.runbook
    acc = rb.acceptance
    reference = acc.reference.mean_length if acc.reference else None
    slo = acc.slo.min_length
    dep = rb.deployment
    scenario = budget.speculative or budget.baseline
    requested = dep.concurrency or scenario.max_running_requests
    params = parameters(pair, budget)
    s = setup(pair, budget, params.values)
    context_source = expected_context(pair)[1]
    cap, cap_reason = capacity(scenario, s.context)
    here_c = min(requested, cap)
    batches = sorted({b for b in CONCURRENCIES if b <= cap} | {here_c, cap})
    curve = [point(s, b, reference, slo) for b in batches]
    here = next(p for p in curve if p.concurrency == here_c)

    def stops(tau: float | None) -> int | None:
        if tau is None:
            return None
        return next((p.concurrency for p in curve
                     if p.concurrency >= here_c and p.break_even >= tau), None)

    needed = here.break_even * (1 + SLO_MARGIN)
    ok = slo >= needed
    where = f"at concurrency {here_c}" + (
        f" (the runbook expects {requested}; the deployment holds {cap})"
        if requested > cap else "")
    hints: list[str] = []
    if slo > s.shape.max_tokens:
        ok = False
        verdict = (f"SLO {slo} exceeds the most tokens one step can yield "
                   f"({s.shape.max_tokens}): unreachable")
        hints.append(f"lower the SLO to at most {s.shape.max_tokens}, or lengthen the "
                     "block / the number of drafted tokens")
    elif ok:
        verdict = (f"SLO {slo} clears break-even τ* = {here.break_even:.2f} (+10% → "
                   f"{needed:.2f}) {where}: expected speedup {here.speedup_at_slo:.2f}× at "
                   "the SLO")
    else:
        verdict = (f"SLO {slo} is below break-even τ* = {here.break_even:.2f} + 10% "
                   f"(= {needed:.2f}) {where}: at that acceptance the pair is slower than "
                   "the target alone")
        lower = [p for p in curve if p.concurrency < here_c
                 and p.break_even * (1 + SLO_MARGIN) <= slo]
        if lower and lower[-1].speedup_at_slo > here.speedup_at_slo:
            hints.append(f"lower concurrency to {lower[-1].concurrency} or less: there τ* = "
                         f"{lower[-1].break_even:.2f} and the speedup at the SLO is "
                         f"{lower[-1].speedup_at_slo:.2f}×")
        hints.append(f"raise the SLO to at least {needed:.2f} only if measured acceptance "
                     "supports it; otherwise a cheaper draft or a shorter block lowers τ*")
    if requested > cap:
        hints.append(f"the runbook expects {requested} concurrent sequences but the "
                     f"deployment holds {cap} ({cap_reason}): raise the KV budget or lower "
                     "the expected concurrency")
    gpu = pair.gpu_spec
    peak = ("FP8 " + f"{gpu.fp8_dense_flops / 1e12:g}") if s.target.fp8 and gpu.fp8_dense_flops \
        else f"BF16 {gpu.bf16_dense_flops / 1e12:g}"
    assumptions = [
        f"{gpu.name}: {gpu.bandwidth_bytes_per_s / 1e12:g} TB/s, {peak} TFLOP/s dense "
        f"(catalog: {gpu.source})",
        f"step-time parameters: {params.values.describe()} — {params.source}",
        f"KV read and attention FLOPs at the expected context of {s.context:,} tokens per "
        f"sequence ({context_source})",
        f"the curve stops at {cap} concurrent sequences: {cap_reason}",
        "a per-output-token cost is paid with and without a draft: it lowers the speedup "
        "at high concurrency but not τ*",
    ]
    if s.target.routed_bytes or (s.draft is not None and s.draft.routed_bytes):
        assumptions.append(
            "MoE: dense weights read every step; of the routed experts, the share N tokens "
            "touch under uniform routing, 1 − (1 − k/E)^N (tree tokens of one sequence "
            "often share experts, so this can overstate a wide verify)")
    return LatencyModel(
        method=rb.speculation.method.value, draft_passes=s.shape.passes,
        tokens_per_draft_pass=s.shape.tokens_per_pass, verify_width=s.shape.verify,
        max_tokens_per_step=s.shape.max_tokens, reference=reference, slo=slo,
        concurrency=here_c, requested_concurrency=requested, expected_context=s.context,
        expected_context_source=context_source, capacity=cap, capacity_reason=cap_reason,
        at_concurrency=here, curve=curve,
        stops_paying_at_slo=stops(slo), stops_paying_at_reference=stops(reference),
        no_gain_at_slo=[p.concurrency for p in curve if p.break_even >= slo],
        slo_verdict=verdict, slo_ok=ok, hints=hints, parameters=params,
        assumptions=assumptions)
