"""The calibrated step-time model: what one decode step costs, with and without a draft.

Every forward costs a fixed part and a roofline part:

    T_forward = fixed + layers · layer_s + allreduces · allreduce_s
                + (T_mem³ + T_flops³)^(1/3),  T_mem = bytes / (η_bw · bandwidth),
                                              T_flops = FLOPs / (η_f · peak)

- the roofline part blends the two roofs (their 3-norm, `blend`) instead of taking the
  larger: a kernel near its ridge reaches neither roof, because a tile's loads and its
  MMAs overlap imperfectly, so at the ridge it takes 2^(1/3) ≈ 1.26 × either roof; far
  from it the larger roof is the time, as with max. The exponent is measured, not fitted
  to the calibration points: decode-shaped cuBLAS BF16 GEMMs on one H200
  (`benchmarks/device/roofline_h200.py`, kept in tests/fixtures/measured/; four serving
  shapes, M = 1-4096 rows, the roofs taken from each shape's M = 1 bandwidth and best
  FLOP rate) run up to 1.16-1.30 × the larger roof between M = 160 and 320, their ridge,
  and the p-norm fits all 80 times best at p = 3-3.5 (rms log error 4.2%; the 2-norm 8.4%,
  max 7.9%); vLLM PR #18778's B200 BF16 table agrees (1.23 × the larger roof at its
  ridge). Before the measurement the 2-norm was used, the one form tried on leave-one-
  source-out then (2026-12-03): sweeps in their published direction 29 → 31 of 32, τ band
  116 → 117 of 125, distinct baseline median 14.5% → 14.6% against max. A roofline per
  kernel class instead (the GEMMs' and the attention's each their own max) left all three
  figures as they were;

- bytes: the weights the step reads (dense part always; of the routed experts the share
  the step's tokens touch, see `Forward.time`, counted at 1 / moe_bw: grouped-
  GEMM expert reads reach only that share of a dense GEMV's bandwidth) plus the KV it
  reads, batch × context × bytes per token, at the *expected* context (prompt plus half
  the output);
- layers · layer_s: each decoder layer's kernel boundaries (launch gaps and tail drain,
  present even in a CUDA graph), which a per-forward constant cannot carry for models of
  different depths;
- FLOPs: 2 × active parameters per token, plus attention, per token 2 · heads ·
  (head_dim + v_head_dim) per layer and per token of context;
- peak: dense FP4 tensor FLOP/s when the weights are NVFP4 (W4A4: activations quantized
  too) and the GPU has FP4 tensor cores (Blackwell), else dense FP8 when the weights are FP8
  or another low-precision format and the GPU has FP8 tensor cores, else dense BF16;
- fixed: the engine's per-forward cost (scheduler, sampling, kernel launches), plus a
  per-speculative-step cost (rejection sampling, tree/mask bookkeeping, draft extend) on
  the verify, and a separate per-draft-forward cost *per drafter family*;
- allreduces: two per layer under tensor parallelism, each `allreduce_s` (its latency)
  plus its message over the GPUs' link: a ring all-reduce sends 2(n−1)/n of the
  activations (hidden × 2 bytes per token of the forward) from every rank, at the link's
  per-direction bandwidth (`LINKS`; PCIe without peer-to-peer stages through host memory).
  This is what makes a wide verify at high concurrency expensive on PCIe cards.

Then T_decode = forward(1 token per sequence), T_verify = forward(verify width) +
speculative_s, T_draft = passes × draft forward, and S(τ) = τ · T_decode / (T_draft +
T_verify).

A measured benchmark also prefills: in a closed loop every finished request is replaced
and its prompt rides along with the next decode steps (`Prefill`: per token a sequence
yields, prompt / output tokens of prompt, at prefill's own GEMM efficiency `eta_prefill`,
with its all-reduced activations and, for a MoE, the experts its tokens touch). A
speculative run finishes requests τ times as fast per step, so its steps carry τ times the
prompts: at high concurrency and short outputs this is a large part of the step. The
calibration points apply it where they publish their prompt and output lengths; a runbook's
step times are decode steps alone.

Every parameter is physical and bounded (`BOUNDS`, each with its reason); the fit
(`fit_bounded`, scipy's bounded trust-region least squares) stays inside them and says
which parameters ended on a bound.

One model-description path: a runbook's resolved geometry and a calibration point's
model entry both become an `Architecture`, and `Architecture.forward(tp, ep)` is the only
place bytes, FLOPs and all-reduces per rank are derived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import cached_property

from specpair.analyse.step_links import LINKS
from specpair.analyse.step_params import StepParams
from specpair.model.memo import value_memo

TP_ALLREDUCES_PER_LAYER = 2  # attention output and MLP output, under tensor parallelism


class UnknownMethod(ValueError):
    """A speculative method the step model has no shape or drafter family for."""


# ------------------------------------------------------------------ drafter families

DRAFTER_FAMILIES = ("eagle", "eagle3", "mtp", "block", "draft-model", "ngram")
"""Per-draft-forward costs are kept per family: EAGLE-1/2 (one decoder layer on the
target's last hidden state), EAGLE-3 (fused three-layer features, its own small vocab),
MTP/NextN (the target's own prediction layer), block drafters DFlash/DSpark (one forward
over the whole block), a separate draft model, and n-gram lookup (CPU, no GPU forward)."""

_METHOD_FAMILY = {"EAGLE": "eagle", "EAGLE3": "eagle3", "MTP": "mtp", "NEXTN": "mtp",
                  "DFLASH": "block", "DSPARK": "block", "STANDALONE": "draft-model",
                  "DRAFT_MODEL": "draft-model", "NGRAM": "ngram"}


def drafter_family(method: str) -> str:
    """The drafter family of a method name (runbook or calibration spelling)."""
    family = _METHOD_FAMILY.get(method.upper())
    if family is None:
        raise UnknownMethod(
            f"unknown speculative method {method!r}: the step model has no draft shape or "
            f"per-draft-forward cost for it; use one of {', '.join(sorted(_METHOD_FAMILY))} "
            "(or null for a baseline-only point)")
    return family


# ------------------------------------------------------------------ model description


@dataclass(frozen=True)
class Architecture:
    """What the step model needs to know of one model, whatever described it."""

    params: float                 # all parameters
    bytes_per_param: float        # weight bytes / parameters, as stored
    layers: int
    attention_layers: int         # layers that read per-token KV of the whole context
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    kv_bytes_per_token: float     # all layers, all ranks (the budget's cell, or derived)
    active_params: float | None = None
    experts: int = 0              # routed experts per MoE layer (0: dense)
    top_k: int = 0
    routed_params: float = 0.0    # all routed experts of all MoE layers
    attention_per_head: int | None = None   # MLA absorbed: 2·kv_lora_rank + rope dim
    prefill_per_head: int | None = None     # MLA prefill, not absorbed: qk (nope + rope)
    #                                         + v head dims; default as `attention_per_head`
    fp8: bool = False
    fp4: bool = False             # NVFP4 (W4A4) weights: the FP4 tensor peak where there is one
    window_layers: int = 0        # sliding-window layers: KV read up to `window` tokens
    window: int = 0
    hidden: int = 0               # residual width (the all-reduced activations); 0: heads ×
    #                               head_dim, which equals it for the families served here
    routed_bytes_per_param: float = 0.0  # the routed experts' own format (MXFP4 experts
    #                               beside BF16 attention); 0: `bytes_per_param`, as the rest

    @value_memo  # a frozen architecture and numbers: every candidate of a plan asks
    def forward(self, tp: int = 1, ep: int = 1, pp: int = 1,
                kv_per_rank: float | None = None, dp_attention: bool = False) -> Forward:
        """The forward on one rank under tensor parallelism `tp`, pipeline `pp` and expert
        parallelism `ep` (EP shards whole experts over `ep` ranks; without it each expert is
        sliced over the TP ranks, so either divides the routed bytes by its degree).
        `kv_per_rank`: the budget's KV bytes per token per rank where one exists, else
        derived from the heads (KV heads replicate beyond TP = KV heads).
        `dp_attention` (SGLang --enable-dp-attention): every rank holds the whole attention
        and dense part and its own sequences' KV; the routed experts are sharded over the
        ranks and see the tokens of all of them."""
        if dp_attention:
            f = self.forward(1, 1, pp, kv_per_rank)
            ranks = max(ep, tp)
            return replace(f, routed_bytes=f.routed_bytes / ranks, routed_batch_scale=ranks,
                           allreduces=TP_ALLREDUCES_PER_LAYER * self.layers if ranks > 1
                           else 0, allreduce_bytes_per_token=self.allreduce_bytes_per_token(
                               ranks))
        shards = tp * pp
        per_head = self.attention_per_head or (self.head_dim + self.v_head_dim)
        attention = 2 * self.heads * per_head * self.attention_layers / shards
        active = self.active_params or self.params
        allreduces = TP_ALLREDUCES_PER_LAYER * self.layers if tp > 1 else 0
        ar_bytes = self.allreduce_bytes_per_token(tp)
        kv = kv_per_rank if kv_per_rank is not None else \
            self.kv_bytes_per_token / min(tp, max(self.kv_heads, 1)) / pp
        per_layer = self.kv_bytes_per_token / max(self.attention_layers, 1)
        window_kv = 0.0 if kv_per_rank is not None or not self.window else \
            per_layer * self.window_layers / min(tp, max(self.kv_heads, 1)) / pp
        window_flops = 2 * self.heads * per_head * self.window_layers / shards
        prefill_attention = 2 * self.heads * (self.prefill_per_head or per_head) \
            * self.attention_layers / shards
        all_bytes = self.params * self.bytes_per_param
        routed_bytes = self.routed_params * (self.routed_bytes_per_param
                                             or self.bytes_per_param)
        share = self.top_k / self.experts if self.experts and self.routed_params else 0.0
        window = {"window": self.window, "window_kv_bytes_per_token": window_kv,
                  "window_attention_flops": window_flops,
                  "allreduce_bytes_per_token": ar_bytes, "layers": math.ceil(self.layers / pp),
                  "fp4": self.fp4,
                  "prefill_attention_flops_per_context_token": prefill_attention}
        if share:
            routed_ranks = max(ep, tp) * pp
            return Forward((all_bytes - routed_bytes) / shards, 2 * active / shards, kv,
                           routed_bytes / routed_ranks, share, attention, allreduces, self.fp8,
                           **window)  # type: ignore[arg-type]
        if self.active_params and self.active_params < self.params:
            # a MoE without its expert layout: its active fraction of all the weights
            return Forward(0.0, 2 * active / shards, kv, all_bytes / shards,
                           self.active_params / self.params, attention, allreduces, self.fp8,
                           **window)  # type: ignore[arg-type]
        return Forward(all_bytes / shards, 2 * active / shards, kv,
                       attention_flops_per_context_token=attention, allreduces=allreduces,
                       fp8=self.fp8, **window)  # type: ignore[arg-type]


    def allreduce_bytes_per_token(self, ranks: int) -> float:
        """Bytes one rank sends per token of a forward in one ring all-reduce of the
        BF16 activations over `ranks` ranks: 2(n−1)/n × hidden × 2."""
        if ranks <= 1:
            return 0.0
        width = self.hidden or self.heads * self.head_dim
        return 2 * (ranks - 1) / ranks * width * ACTIVATION_BYTES


ACTIVATION_BYTES = 2  # BF16 activations are what the TP all-reduces carry


@dataclass(frozen=True)
class Forward:
    """One model's forward on one rank, as bytes and FLOPs per token."""

    weight_bytes: float   # weights every token reads, on this rank (dense part of a MoE)
    flops_per_token: float
    kv_bytes_per_token: float
    routed_bytes: float = 0.0   # all routed experts on this rank
    routed_share: float = 0.0   # top-k / experts: what one token reads of them
    attention_flops_per_context_token: float = 0.0
    allreduces: int = 0         # per forward; 0 without tensor parallelism
    fp8: bool = False           # FP8 weights: FP8 tensor-core FLOPs where the GPU has them
    routed_batch_scale: int = 1  # data-parallel attention: ranks whose tokens meet here
    window: int = 0             # sliding-window layers read at most this many tokens of KV
    window_kv_bytes_per_token: float = 0.0
    window_attention_flops: float = 0.0
    allreduce_bytes_per_token: float = 0.0  # one all-reduce's bytes per rank and token
    layers: int = 0             # decoder layers on this rank: each pays `layer_s`
    prefill_attention_flops_per_context_token: float | None = None  # prompt tokens' (MLA
    #                             prefill attends without the absorption); None: as decode
    fp4: bool = False           # NVFP4 (W4A4) weights: FP4 tensor-core FLOPs where the GPU
    #                             has them (`Hardware.fp4_flops`), else as `fp8`

    def __hash__(self) -> int:
        """By value, as `==` compares, computed once: the memos (`specpair.model.memo`) hash the
        forwards of a setup on every call. Every field is a number, whose hash is the same
        in every process, so a copied (pickled) forward carries a valid one."""
        known = self.__dict__.get("_hash")
        if known is None:
            known = hash(tuple(map(self.__dict__.__getitem__, _FORWARD_FIELDS)))
            object.__setattr__(self, "_hash", known)
        return known

    def time(self, batch: int, tokens_per_seq: int, context: int, bandwidth: float,
             flops: float, locality: float = 1.0, chain: int | None = None,
             moe_bw: float = 1.0, extra: float = 0.0, extra_context: int = 0,
             prefill_flops: float | None = None) -> float:
        """The roofline part alone, at the bandwidth and FLOP/s given (`prefill_flops`:
        the FLOP/s the `extra` prompt tokens' large GEMMs reach, default `flops`): the
        memory and compute times blended (`blend`). One function, not one per roof: the
        latency fits evaluate it some sixteen million times.

        Compute: FLOPs per token (plus attention over the context, the sliding layers
        over at most their window) for the batch's tokens; `extra` prompt tokens (mean
        context `extra_context`) ride along in the same forward (chunked prefill of the
        requests that replace finished ones), at the prefill attention's FLOPs.

        Memory: the weights every token reads, the KV of the context (the sliding
        layers' up to their window), and the share of the routed experts the forward
        reads, counted at 1 / `moe_bw` (their grouped-GEMM reads reach that share of the
        dense kernels' bandwidth). Sequences route independently: N independent tokens
        touch 1 − (1 − k/E)^N of the experts. The tokens *one* sequence verifies in a
        step are consecutive positions of one text, and consecutive tokens pick largely
        the same experts (expert-reuse in MoE routing traces); they count as w^ρ
        independent tokens, ρ = `locality` (1: uniform routing, the upper bound). ρ is
        fitted under bounds, so a published small-batch MoE sweep decides how much a wide
        verify costs. A tree verify (`chain` = its depth, the most tokens a step yields,
        below its width) holds `tokens_per_seq / chain` branches: siblings are different
        tokens at one position, so each branch routes on its own and only along a branch
        does the locality hold: (w / chain) · chain^ρ independent tokens."""
        window = self.window
        compute = (self.flops_per_token + context * self.attention_flops_per_context_token
                   + min(context, window) * self.window_attention_flops) \
            * batch * tokens_per_seq / flops
        if extra:
            prefill = self.prefill_attention_flops_per_context_token
            per_token = self.flops_per_token + extra_context * (
                self.attention_flops_per_context_token if prefill is None else prefill) \
                + min(extra_context, window) * self.window_attention_flops
            compute += per_token * extra / (prefill_flops or flops)
        routed = 0.0
        if self.routed_bytes:
            depth = min(chain or tokens_per_seq, tokens_per_seq)
            n = batch * self.routed_batch_scale * tokens_per_seq / depth * depth ** locality
            n += extra * self.routed_batch_scale  # prompt tokens route independently
            routed = self.routed_bytes * float(1 - (1 - self.routed_share) ** n) / moe_bw
        memory = self.weight_bytes + routed + batch * (
            context * self.kv_bytes_per_token
            + min(context, window) * self.window_kv_bytes_per_token)
        return blend(memory / bandwidth, compute)


ROOFLINE_NORM = 3
"""The exponent of the roofs' blend, measured on an H200's decode-shaped BF16 GEMMs (the
module docstring; tests/analyse/test_roofline_measured.py holds it to that measurement)."""


def blend(memory_s: float, compute_s: float, norm: float = ROOFLINE_NORM) -> float:
    """A kernel's time from its two roofs: their `norm`-norm, the larger roof far from
    the ridge, 2^(1/norm) × either at it."""
    return float((memory_s ** norm + compute_s ** norm) ** (1 / norm))


_FORWARD_FIELDS = tuple(f.name for f in fields(Forward))



@dataclass(frozen=True)
class Hardware:
    bandwidth: float
    bf16_flops: float
    fp8_flops: float | None = None
    link: str = "nvlink4"  # `LINKS` key: what the TP all-reduces cross
    fp4_flops: float | None = None  # dense FP4 tensor peak (Blackwell), None without one

    # computed once per instance (a frozen dataclass keeps them in its __dict__): every
    # forward's time reads them
    @cached_property
    def link_bandwidth(self) -> float:
        return LINKS[self.link].bandwidth

    @cached_property
    def host_staged(self) -> bool:
        """All-reduces staged through host memory (PCIe without peer-to-peer)."""
        return self.link.endswith("-host")

    def peak(self, forward: Forward) -> float:
        if forward.fp4 and self.fp4_flops:
            return self.fp4_flops
        return self.fp8_flops if forward.fp8 and self.fp8_flops else self.bf16_flops


@dataclass(frozen=True)
class Shape:
    passes: int          # draft forwards per step
    tokens_per_pass: int  # tokens per sequence in one draft forward
    verify: int          # tokens per sequence the target verifies
    max_tokens: int      # most tokens one step can yield


def shape_for(method: str, gamma: int | None, block: int | None, steps: int | None,
              topk: int, draft_tokens: int | None) -> Shape:
    """Draft forwards and verify width of one speculative step, per method ("NONE": no
    draft). An unknown method is an `UnknownMethod` error, never a default shape."""
    if method == "NONE":
        return Shape(0, 0, 1, 1)
    family = drafter_family(method)
    if family == "ngram":
        g = gamma or 1
        return Shape(0, 0, g + 1, g + 1)
    if family == "block":
        b = block or 1
        if method.upper() == "DSPARK":
            return Shape(1, b, b + 1, b + 1)
        return Shape(1, b, b, b)
    if topk > 1 or (steps is not None and draft_tokens is not None):
        s = steps or 1
        return Shape(s, topk, draft_tokens or s + 1, s + 1)
    g = gamma or steps or 1
    return Shape(g, 1, g + 1, g + 1)


@dataclass(frozen=True)
class StepTimes:
    decode: float   # one plain decode step, its one token per sequence included
    draft: float
    verify: float   # without the per-token part, which depends on τ
    per_token: float  # batch × token_s: what each token per sequence a step yields adds
    prefill_per_token: float = 0.0  # the prompts that replace finished requests, per
    #                                 token per sequence a speculative step yields

    def speculative(self, tau: float) -> float:
        return self.draft + self.verify + tau * (self.per_token + self.prefill_per_token)

    def speedup(self, tau: float) -> float:
        return tau * self.decode / self.speculative(tau)

    def break_even(self) -> float:
        """τ* where S = 1: τ·T_dec = T_draft + T_verify + τ·B·(token_s + prefill)."""
        room = self.decode - self.per_token - self.prefill_per_token
        return (self.draft + self.verify) / room if room > 0 else math.inf


PREFILL_CHUNK_TOKENS = 8192
"""Prompt tokens one prefill forward takes at most: SGLang's default --chunked-prefill-size
on 80-160 GB GPUs and vLLM's default max_num_batched_tokens for its API server on GPUs
with at least 70 GB (both engines' server defaults; larger GPUs get up to 16384 in SGLang,
taken at 8192 here, the larger chunk's cost per token being smaller still). A prompt up to
this length is prefilled as one chunk."""


@dataclass(frozen=True)
class Prefill:
    """Prompt tokens that ride along with decode steps in a closed-loop benchmark: every
    finished request is replaced by a new one whose prompt is prefilled in the following
    steps. Per token a sequence yields, `ratio` = prompt / output tokens of prompt ride
    along, times `share` (1 for a throughput over wall time; (B − 1)/B for a TPOT, which
    excludes the request's own prefill). Each prompt is prefilled in chunks of up to
    `PREFILL_CHUNK_TOKENS` (whether mixed into a decode batch, vLLM's chunked prefill, or
    as a batch of its own, SGLang's default, the chunk's tokens arrive together): a
    chunk's cost is the marginal cost of those tokens in one forward, shared by them, so
    a MoE's experts are read once per chunk, not once per few prompt tokens. Where the
    chunk runs as a batch of its own (SGLang's default) it also re-reads the dense weights
    once, which the marginal cost leaves out: there the prefill cost is a lower bound."""

    ratio: float
    share: float
    prompt: int     # tokens of one prompt (its mean context while prefilled: half)


def forward_time(fwd: Forward, batch: int, tokens: int, context: int, hw: Hardware,
                 p: StepParams, fixed: float, chain: int | None = None,
                 extra: float = 0.0, extra_context: int = 0) -> float:
    link = hw.link_bandwidth * (p.host_link if hw.host_staged else 1.0)
    message = (batch * fwd.routed_batch_scale * tokens + extra * fwd.routed_batch_scale) \
        * fwd.allreduce_bytes_per_token / link
    peak = hw.peak(fwd)
    return fixed + fwd.layers * p.layer_s + fwd.allreduces * (p.allreduce_s + message) + fwd.time(
        batch, tokens, context, p.eta_bw * hw.bandwidth, p.eta_flops * peak,
        p.moe_locality, chain, p.moe_bw, extra, extra_context, p.eta_prefill * peak)


def _ride_along(prefill: Prefill | None, batch: int) -> tuple[float, int, int] | None:
    """Prompt tokens per yielded token, a prompt's mean context while prefilled, and its
    chunk, or None when no prompt rides along.

    A prompt is prefilled in chunks of up to the engine's token budget, not a few tokens
    per decode step: each chunk's cost (its FLOPs at eta_prefill, the experts its many
    tokens touch, read once for the whole chunk) is shared by its tokens."""
    if prefill is None or prefill.ratio <= 0 or prefill.share <= 0:
        return None
    rate = batch * prefill.ratio * prefill.share
    return rate, prefill.prompt // 2, max(1, min(prefill.prompt, PREFILL_CHUNK_TOKENS))


def _per_prompt_token(fwd: Forward, batch: int, tokens: int, context: int, hw: Hardware,
                      p: StepParams, chain: int | None, chunk: int, half: int) -> float:
    return (forward_time(fwd, batch, tokens, context, hw, p, 0.0, chain, chunk, half)
            - forward_time(fwd, batch, tokens, context, hw, p, 0.0, chain)) / chunk


def decode_time(target: Forward, batch: int, context: int, hw: Hardware, p: StepParams,
                prefill: Prefill | None = None) -> float:
    """One plain decode step (`StepTimes.decode`), its ride-along prompts included."""
    t_dec = forward_time(target, batch, 1, context, hw, p, p.forward_s) + batch * p.token_s
    ride = _ride_along(prefill, batch)
    if ride is not None:
        rate, half, chunk = ride
        t_dec += rate * _per_prompt_token(target, batch, 1, context, hw, p, None, chunk, half)
    return t_dec


def step_times(target: Forward, draft: Forward | None, shape: Shape, batch: int,
               context: int, hw: Hardware, p: StepParams,
               prefill: Prefill | None = None) -> StepTimes:
    t_dec = decode_time(target, batch, context, hw, p, prefill)
    t_ver = forward_time(target, batch, shape.verify, context, hw, p,
                         p.forward_s + p.speculative_s, chain=shape.max_tokens)
    t_draft = 0.0
    if shape.passes and draft is not None:
        t_draft = shape.passes * forward_time(draft, batch, shape.tokens_per_pass, context,
                                              hw, p, p.draft_s)
    elif shape.verify > 1 and not shape.passes:
        t_draft = p.draft_s  # n-gram: the proposer's CPU lookup, no GPU forward
    prefill_per_token = 0.0
    ride = _ride_along(prefill, batch)
    if ride is not None and shape.verify > 1:
        # a drafter that keeps its own KV (EAGLE, MTP, a draft model, a block drafter)
        # prefills too
        rate, half, chunk = ride
        cost = _per_prompt_token(target, batch, shape.verify, context, hw, p,
                                 shape.max_tokens, chunk, half)
        if draft is not None:
            cost += _per_prompt_token(draft, batch, shape.tokens_per_pass or 1, context, hw,
                                      p, None, chunk, half)
        prefill_per_token = rate * cost
    return StepTimes(t_dec, t_draft, t_ver, batch * p.token_s, prefill_per_token)


memo_step_times = value_memo(step_times)
"""`step_times` memoised on its arguments, all frozen values (`specpair.model.memo`): the
serving paths (the planner, the latency model, the schedule) ask for the step times of one
setup at one batch many times. A calibration fit varies the parameters on every call and
calls `step_times` itself."""
