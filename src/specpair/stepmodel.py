"""The calibrated step-time model: what one decode step costs, with and without a draft.

Every forward costs a fixed part and a roofline part:

    T_forward = fixed + allreduces · allreduce_s
                + max(bytes / (η_bw · bandwidth), FLOPs / (η_f · peak))

- bytes: the weights the step reads (dense part always; routed experts by the share N
  tokens touch under uniform routing, 1 − (1 − k/E)^N) plus the KV it reads, batch ×
  context × bytes per token, at the *expected* context (prompt plus half the output);
- FLOPs: 2 × active parameters per token, plus attention, per token 2 · heads ·
  (head_dim + v_head_dim) per layer and per token of context;
- peak: dense FP8 tensor FLOP/s when the weights are FP8 and the GPU has FP8 tensor cores,
  else dense BF16;
- fixed: the engine's per-forward cost (scheduler, sampling, kernel launches), plus a
  per-speculative-step cost (rejection sampling, tree/mask bookkeeping, draft extend) on
  the verify, and a separate per-draft-forward cost;
- allreduces: two per layer under tensor parallelism, each `allreduce_s`.

Then T_decode = forward(1 token per sequence), T_verify = forward(verify width) +
speculative_s, T_draft = passes × draft forward, and S(τ) = τ · T_decode / (T_draft +
T_verify). The six parameters (η_bw, η_f, forward_s, speculative_s, draft_s, allreduce_s)
are fitted per GPU family × engine on published measurements (`data/calibration.yaml`)
or on a pair's own bench records (`specpair calibrate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import Field

from specpair.schema.common import Strict


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

    def memory(self, batch: int, tokens_per_seq: int, context: int) -> float:
        n = batch * tokens_per_seq
        # N tokens routed uniformly touch 1 − (1 − k/E)^N of the experts
        routed = self.routed_bytes * (1 - (1 - self.routed_share) ** n) if self.routed_bytes \
            else 0.0
        return self.weight_bytes + routed + batch * context * self.kv_bytes_per_token

    def flops(self, batch: int, tokens_per_seq: int, context: int) -> float:
        per_token = self.flops_per_token + context * self.attention_flops_per_context_token
        return per_token * batch * tokens_per_seq

    def time(self, batch: int, tokens_per_seq: int, context: int, bandwidth: float,
             flops: float) -> float:
        """The roofline part alone, at the bandwidth and FLOP/s given."""
        return max(self.memory(batch, tokens_per_seq, context) / bandwidth,
                   self.flops(batch, tokens_per_seq, context) / flops)


class StepParams(Strict):
    eta_bw: float = Field(gt=0, le=1, description="achieved share of peak bandwidth")
    eta_flops: float = Field(gt=0, le=1, description="achieved share of peak dense FLOP/s")
    forward_s: float = Field(ge=0, description="fixed cost of one target forward")
    speculative_s: float = Field(ge=0, description="fixed extra cost of a speculative step")
    draft_s: float = Field(ge=0, description="fixed cost of one draft forward")
    allreduce_s: float = Field(ge=0, description="one tensor-parallel all-reduce")
    token_s: float = Field(default=0.0, ge=0, description="per output token and sequence "
                           "(detokenise, stream, per-request bookkeeping), serial")

    def describe(self) -> str:
        return (f"η_bw {self.eta_bw:.2f}, η_f {self.eta_flops:.2f}, per forward "
                f"{self.forward_s * 1e3:.2f} ms, per speculative step "
                f"{self.speculative_s * 1e3:.2f} ms, per draft forward "
                f"{self.draft_s * 1e3:.2f} ms, per all-reduce {self.allreduce_s * 1e6:.0f} µs, "
                f"per output token {self.token_s * 1e6:.0f} µs")


@dataclass(frozen=True)
class Hardware:
    bandwidth: float
    bf16_flops: float
    fp8_flops: float | None = None

    def peak(self, forward: Forward) -> float:
        return self.fp8_flops if forward.fp8 and self.fp8_flops else self.bf16_flops


@dataclass(frozen=True)
class Shape:
    passes: int          # draft forwards per step
    tokens_per_pass: int  # tokens per sequence in one draft forward
    verify: int          # tokens per sequence the target verifies
    max_tokens: int      # most tokens one step can yield


@dataclass(frozen=True)
class StepTimes:
    decode: float   # one plain decode step, its one token per sequence included
    draft: float
    verify: float   # without the per-token part, which depends on τ
    per_token: float  # batch × token_s: what each token per sequence a step yields adds

    def speculative(self, tau: float) -> float:
        return self.draft + self.verify + tau * self.per_token

    def speedup(self, tau: float) -> float:
        return tau * self.decode / self.speculative(tau)

    def break_even(self) -> float:
        """τ* where S = 1: τ·T_dec = T_draft + T_verify + τ·B·token_s."""
        room = self.decode - self.per_token
        return (self.draft + self.verify) / room if room > 0 else math.inf


def forward_time(fwd: Forward, batch: int, tokens: int, context: int, hw: Hardware,
                 p: StepParams, fixed: float) -> float:
    return fixed + fwd.allreduces * p.allreduce_s + fwd.time(
        batch, tokens, context, p.eta_bw * hw.bandwidth, p.eta_flops * hw.peak(fwd))


def step_times(target: Forward, draft: Forward | None, shape: Shape, batch: int,
               context: int, hw: Hardware, p: StepParams) -> StepTimes:
    per_token = batch * p.token_s
    t_dec = forward_time(target, batch, 1, context, hw, p, p.forward_s) + per_token
    t_ver = forward_time(target, batch, shape.verify, context, hw, p,
                         p.forward_s + p.speculative_s)
    t_draft = 0.0
    if draft is not None and shape.passes:
        t_draft = shape.passes * forward_time(draft, batch, shape.tokens_per_pass, context,
                                              hw, p, p.draft_s)
    return StepTimes(t_dec, t_draft, t_ver, per_token)


# ------------------------------------------------------------------ fitting

FIT_NAMES = ("eta_bw", "eta_flops", "forward_s", "speculative_s", "draft_s", "allreduce_s",
             "token_s")
# wide enough for a CPU test host as well as a GPU (a pair's own records may be either)
BOUNDS = {"eta_bw": (0.01, 1.0), "eta_flops": (0.01, 1.0), "forward_s": (1e-5, 1.0),
          "speculative_s": (1e-6, 1.0), "draft_s": (1e-6, 1.0), "allreduce_s": (1e-6, 1e-3),
          "token_s": (1e-7, 0.1)}


def _clamp(name: str, value: float) -> float:
    lo, hi = BOUNDS[name]
    return min(hi, max(lo, value))


def fit(loss: Callable[[StepParams], float], start: StepParams,
        free: Sequence[str] = FIT_NAMES, iterations: int = 600) -> StepParams:
    """Minimise `loss` over the free parameters (Nelder-Mead in log space, deterministic).

    Parameters outside `free` keep their starting values; all stay within BOUNDS."""
    base = start.model_dump()

    def params(x: Sequence[float]) -> StepParams:
        values = dict(base)
        for name, v in zip(free, x, strict=True):
            values[name] = _clamp(name, math.exp(v))
        return StepParams.model_validate(values)

    def f(x: Sequence[float]) -> float:
        return loss(params(x))

    x0 = [math.log(_clamp(n, base[n])) for n in free]
    simplex = [x0] + [[v + (0.5 if i == j else 0.0) for j, v in enumerate(x0)]
                      for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(len(simplex)), key=lambda i: values[i])
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] < 1e-12:
            break
        centroid = [sum(x[j] for x in simplex[:-1]) / (len(simplex) - 1)
                    for j in range(len(x0))]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                top = simplex[0]
                simplex = [top] + [[b + 0.5 * (v - b) for b, v in zip(top, x, strict=True)]
                                   for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    winner = min(range(len(simplex)), key=lambda i: values[i])
    fitted = params(simplex[winner])
    # round so the stored values and every output derived from them are stable
    return StepParams.model_validate({k: float(f"{v:.4g}")
                                      for k, v in fitted.model_dump().items()})
