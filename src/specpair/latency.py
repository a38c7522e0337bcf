"""Break-even acceptance and expected speedup, from a roofline of the GPU.

Per decode step and per rank, each forward costs max(bytes / bandwidth, FLOPs / peak):
bytes are the weights it reads plus the KV it reads (batch × context × bytes per token),
FLOPs are 2 × active parameters × tokens. Then, for batch B (the concurrency):

    T_dec    = one target forward of 1 token per sequence          (no speculation)
    T_verify = one target forward of the verify width per sequence
    T_draft  = autoregressive drafts (EAGLE, EAGLE3, MTP, STANDALONE): one draft
               forward per drafted step (a tree step carries topk tokens per sequence);
               block drafters (DFLASH, DSPARK): one draft forward over the whole block;
               NGRAM: nothing on the GPU.

    speedup S(τ, B) = τ · T_dec / (T_draft + T_verify)       τ = tokens per verify step,
    break-even τ*(B) = (T_draft + T_verify) / T_dec              bonus token included

With T_verify = T_dec (memory-bound verify) and T_draft = γ·c·T_dec this is Leviathan et
al.'s Theorem 3.8, S = E[tokens] / (γc + 1), where E[tokens] = (1 − α^(γ+1)) / (1 − α)
under i.i.d. acceptance α. For a block drafter the draft term is one constant c_blk
(nearly flat in the block length while the draft is memory-bound), so S ≈ τ / (c_blk + v):
block acceptance is not i.i.d. (it decays along the block), so τ should be measured, not
derived from α.

Assumptions, stated on every output: peak bandwidth and dense BF16 FLOP/s (no efficiency
factor: ratios matter, not absolute times); KV read at the full serving context (the
worst case); MoE weights read as the expected share of experts a batch touches with
uniform routing, 1 − (1 − k/E)^N for N tokens and top-k of E experts; attention FLOPs and
the sampling/bookkeeping time are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from specpair.budget.model import Budget
from specpair.resolve import ResolvedArtifact, ResolvedPair
from specpair.schema.common import Method, Strict

CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SLO_MARGIN = 0.10
"""The SLO must clear break-even by 10%: acceptance drifts with traffic."""


def leviathan_expected_tokens(alpha: float, gamma: int) -> float:
    """Expected tokens per iteration with γ drafts and i.i.d. acceptance α (Eq. 1)."""
    if alpha >= 1.0:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def leviathan_speedup(alpha: float, gamma: int, c: float) -> float:
    """Walltime improvement of Theorem 3.8: E[tokens] / (γc + 1)."""
    return leviathan_expected_tokens(alpha, gamma) / (gamma * c + 1)


@dataclass(frozen=True)
class Forward:
    weight_bytes: float   # weights every token reads, on this rank (dense part of a MoE)
    flops_per_token: float
    kv_bytes_per_token: float
    routed_bytes: float = 0.0   # all routed experts on this rank
    routed_share: float = 0.0   # top-k / experts: what one token reads of them

    def time(self, batch: int, tokens_per_seq: int, context: int, bandwidth: float,
             flops: float) -> float:
        n = batch * tokens_per_seq
        # N tokens routed uniformly touch 1 − (1 − k/E)^N of the experts
        routed = self.routed_bytes * (1 - (1 - self.routed_share) ** n) if self.routed_bytes \
            else 0.0
        memory = self.weight_bytes + routed + batch * context * self.kv_bytes_per_token
        return max(memory / bandwidth, self.flops_per_token * n / flops)


class Point(Strict):
    concurrency: int
    t_decode_s: float
    t_draft_s: float
    t_verify_s: float
    break_even: float = Field(description="τ*: tokens per verify step at which S = 1")
    speedup_at_reference: float | None
    speedup_at_slo: float


class LatencyModel(Strict):
    method: str
    draft_passes: int
    tokens_per_draft_pass: int
    verify_width: int
    max_tokens_per_step: int
    reference: float | None
    slo: float
    concurrency: int = Field(description="the runbook's expected concurrency")
    at_concurrency: Point
    curve: list[Point]
    stops_paying_at_slo: int | None = Field(
        description="smallest concurrency at or above the runbook's where τ* ≥ the SLO's "
                    "acceptance (None: not up to 4096)")
    stops_paying_at_reference: int | None
    no_gain_at_slo: list[int] = Field(description="concurrencies of the curve where τ* ≥ SLO")
    slo_verdict: str
    slo_ok: bool
    assumptions: list[str]


@dataclass(frozen=True)
class Shape:
    passes: int
    tokens_per_pass: int
    verify: int
    max_tokens: int


def draft_shape(pair: ResolvedPair) -> Shape:
    spec = pair.runbook.speculation
    if spec.method is Method.NGRAM:
        gamma = spec.num_speculative_tokens or 1
        return Shape(0, 0, gamma + 1, gamma + 1)
    if spec.method is Method.DSPARK:
        block = spec.block_size or 1
        return Shape(1, block, block + 1, block + 1)
    if spec.method is Method.DFLASH:
        block = spec.block_size or 1
        return Shape(1, block, block, block)
    if spec.topk > 1:
        steps = spec.num_steps or 1
        return Shape(steps, spec.topk, spec.num_draft_tokens or steps + 1, steps + 1)
    gamma = spec.num_speculative_tokens or 1
    return Shape(gamma, 1, gamma + 1, gamma + 1)


def _forward(art: ResolvedArtifact, weight_bytes: int, active_params: int, shards: int,
             kv: int) -> Forward:
    """A model's per-rank forward: dense weights always read, routed experts by coverage.

    With the expert layout in the geometry the routed part is exact (E experts of known
    size, top-k); without it a MoE falls back to its active fraction of all weights."""
    total = art.weights.total_params or 1
    per_param = weight_bytes / total
    moe = art.geometry.moe
    flops = 2 * active_params / shards
    if moe is not None and moe.routed_params < total:
        routed = moe.routed_params * per_param
        return Forward((weight_bytes - routed) / shards, flops, kv, routed / shards,
                       moe.active_experts / moe.experts)
    fraction = art.weights.active_fraction
    if fraction < 1.0:
        return Forward(0.0, flops, kv, weight_bytes / shards, fraction)
    return Forward(weight_bytes / shards, flops, kv)


def forwards(pair: ResolvedPair, budget: Budget) -> tuple[Forward, Forward | None]:
    dep = pair.runbook.deployment
    tp, pp = dep.parallel.tensor, dep.parallel.pipeline
    spec_scn = budget.speculative or budget.baseline
    target = _forward(pair.target, pair.target_own_weight_bytes, pair.target_own_active_params,
                      tp * pp, spec_scn.cell_target)
    if pair.draft is None or pair.runbook.speculation.method is Method.NGRAM:
        return target, None
    d_w = pair.draft.weights
    d_tp = dep.parallel.draft_tensor or tp
    draft = _forward(pair.draft, d_w.weight_bytes, d_w.active_params or d_w.total_params,
                     d_tp, spec_scn.cell_draft)
    return target, draft


def point(pair: ResolvedPair, target: Forward, draft: Forward | None, shape: Shape, batch: int,
          reference: float | None, slo: float) -> Point:
    gpu = pair.gpu_spec
    bw, flops = gpu.bandwidth_bytes_per_s, gpu.bf16_dense_flops
    context = pair.runbook.deployment.context_length
    t_dec = target.time(batch, 1, context, bw, flops)
    t_ver = target.time(batch, shape.verify, context, bw, flops)
    t_draft = 0.0
    if draft is not None and shape.passes:
        t_draft = shape.passes * draft.time(batch, shape.tokens_per_pass, context, bw, flops)
    cost = t_draft + t_ver
    return Point(concurrency=batch, t_decode_s=t_dec, t_draft_s=t_draft, t_verify_s=t_ver,
                 break_even=round(cost / t_dec, 4),
                 speedup_at_reference=round(reference * t_dec / cost, 4) if reference else None,
                 speedup_at_slo=round(slo * t_dec / cost, 4))


def model(pair: ResolvedPair, budget: Budget) -> LatencyModel:
    rb = pair.runbook
    acc = rb.acceptance
    reference = acc.reference.mean_length if acc.reference else None
    slo = acc.slo.min_length
    dep = rb.deployment
    concurrency = dep.concurrency or (budget.speculative or budget.baseline).max_running_requests
    shape = draft_shape(pair)
    target, draft = forwards(pair, budget)
    batches = sorted({b for b in CONCURRENCIES if b <= max(concurrency, 1) * 4} | {concurrency})
    curve = [point(pair, target, draft, shape, b, reference, slo) for b in batches]
    here = next(p for p in curve if p.concurrency == concurrency)

    def stops(tau: float | None) -> int | None:
        if tau is None:
            return None
        for b in sorted({concurrency, *CONCURRENCIES, 1024, 2048, 4096}):
            if b >= concurrency and point(pair, target, draft, shape, b, reference,
                                          slo).break_even >= tau:
                return b
        return None

    needed = here.break_even * (1 + SLO_MARGIN)
    ok = slo >= needed
    if slo > shape.max_tokens:
        ok = False
        verdict = (f"SLO {slo} exceeds the most tokens one step can yield "
                   f"({shape.max_tokens}): unreachable")
    elif ok:
        verdict = (f"SLO {slo} clears break-even τ* = {here.break_even:.2f} (+10% → "
                   f"{needed:.2f}) at concurrency {concurrency}: expected speedup "
                   f"{here.speedup_at_slo:.2f}× at the SLO")
    else:
        verdict = (f"SLO {slo} is below break-even τ* = {here.break_even:.2f} + 10% "
                   f"(= {needed:.2f}) at concurrency {concurrency}: at that acceptance the "
                   "pair is slower than the target alone")
    gpu = pair.gpu_spec
    return LatencyModel(
        method=rb.speculation.method.value, draft_passes=shape.passes,
        tokens_per_draft_pass=shape.tokens_per_pass, verify_width=shape.verify,
        max_tokens_per_step=shape.max_tokens, reference=reference, slo=slo,
        concurrency=concurrency, at_concurrency=here, curve=curve,
        stops_paying_at_slo=stops(slo), stops_paying_at_reference=stops(reference),
        no_gain_at_slo=[p.concurrency for p in curve if p.break_even >= slo],
        slo_verdict=verdict, slo_ok=ok,
        assumptions=[
            f"{gpu.name}: {gpu.bandwidth_bytes_per_s / 1e12:g} TB/s, "
            f"{gpu.bf16_dense_flops / 1e12:g} TFLOP/s dense BF16 (peak; no efficiency factor)",
            f"KV read at the full context length {dep.context_length} for every sequence",
            "MoE: dense weights read every step; of the routed experts, the share N tokens "
            "touch under uniform routing, 1 − (1 − k/E)^N (at low concurrency this is most "
            "of a MoE target's verify cost; engines latency-bound at batch 1 favour "
            "speculation more than this model)",
            "attention FLOPs, sampling and scheduler time left out",
        ])


