"""The step model's parameters, the physical bound each is fitted within (with why), and
the bounded fit itself: least squares in log space inside those bounds."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import Field

from specpair.model.common import Strict


@dataclass(frozen=True)
class Bound:
    lo: float
    hi: float
    why: str


SAMPLER_TOKEN_S = 41.6e-6
"""A sampler's measured cost per token at batch 1: vLLM's sampler benchmark (PR #23997,
benchmark_sampler_core.py) reports ~24K tokens/s greedy at batch 1 and ~96K at batch 4,
i.e. ≤ 41.6 µs per token per sequence, falling with the batch. A per-output-token cost per
sequence above that would be more than sampling plus its launch costs; the engines
detokenise and stream off the GPU's critical path."""

GEMV_BANDWIDTH_SHARE = 0.952
"""The decode GEMV's marginal bandwidth (seconds per extra byte, 8-256 experts' bytes of
DeepSeek-V3's TP-8 slice as one dense BF16 GEMV, tests/fixtures/measured/
h200_grouped_experts.json): 4.265 TB/s on an H200, 0.952 of the 4.48 TB/s BabelStream's fastest
kernel reaches there (data/gpus.yaml). A decode step's weight reads go no faster than the
best dense GEMV's, so this is `eta_bw`'s upper bound."""

BOUNDS: dict[str, Bound] = {
    "eta_bw": Bound(0.30, GEMV_BANDWIDTH_SHARE, "share of the GPU's achievable bandwidth "
                    "(what the fastest reading kernel of a published bandwidth test reaches "
                    "on it, data/gpus.yaml) that decode GEMV / grouped-GEMM kernels reach: at "
                    "most what cuBLAS's decode GEMV reaches of it, measured on an H200 "
                    "(GEMV_BANDWIDTH_SHARE); below 0.3 no tuned serving kernel runs"),
    "eta_flops": Bound(0.20, 0.85, "achieved share of dense tensor peak for serving GEMMs: "
                       "cuBLAS/CUTLASS large GEMMs reach 0.7-0.8; skinny verify GEMMs less"),
    "forward_s": Bound(1e-4, 8e-3, "per-forward fixed cost of a Python serving engine with "
                       "CUDA graphs (scheduler iteration, input prep, graph replay, sampler "
                       "launch): ≥ 0.1 ms, and a step of several ms at batch 1 is a bug"),
    "speculative_s": Bound(2e-5, 6e-3, "per-speculative-step extra (rejection sampling, "
                           "tree mask, draft extend, KV bookkeeping of accepted tokens)"),
    "allreduce_s": Bound(2e-6, 6e-5, "one small-message all-reduce over NVLink/xGMI: custom "
                         "all-reduce kernels take a few µs, NCCL ring ≲ 50 µs"),
    "token_s": Bound(1e-7, SAMPLER_TOKEN_S, "per output token per sequence, at most a "
                     "sampler's measured cost (vLLM PR #23997: ~24K tokens/s at batch 1, "
                     "≤ 41.6 µs)"),
    "layer_s": Bound(1e-6, 1e-4, "per decoder layer and forward: the kernel boundaries of "
                     "one layer each drain the GPU and wait on the next launch even inside a "
                     "CUDA graph, a few µs each; a dense layer runs ~8-12 kernels (norms, "
                     "QKV, RoPE/KV write, attention, output, MLP), a MoE layer with MLA "
                     "20-30 (router, top-k, permute, two grouped GEMMs, shared expert, "
                     "unpermute, absorbed projections): at most ~100 µs"),
    "moe_bw": Bound(0.25, 1.0, "share of the dense kernels' achieved bandwidth that the "
                    "routed experts' grouped-GEMM reads reach: a decode step gives each "
                    "expert a few tokens, so fused-MoE kernels read many small weight tiles "
                    "with routing gathers in between; 1 is as fast as a dense GEMV, below a "
                    "quarter no tuned MoE kernel runs"),
    "moe_locality": Bound(0.2, 1.0, "ρ: the w verify tokens of one sequence count as w^ρ "
                          "independent tokens for expert coverage; 1 is uniform routing"),
    "eta_prefill": Bound(0.3, 0.85, "achieved share of dense tensor peak for prefill "
                         "GEMMs (thousands of tokens per GEMM, the large-GEMM case): cuBLAS/"
                         "CUTLASS large GEMMs reach 0.7-0.8; prefill attention and chunk "
                         "boundaries cost some of it"),
    "host_link": Bound(0.2, 1.0, "share of the measured host-staged all-reduce bandwidth "
                       "(`LINKS` *-host, a bare-metal measurement) that a deployment reaches: "
                       "1 on bare metal with the GPUs and the staging memory on one socket; "
                       "less where staging crosses sockets or an IOMMU/hypervisor (cloud VMs, "
                       "whose disabled P2P is often why they stage at all); below a fifth a "
                       "PCIe 5 host path would be slower than PCIe 3"),
}
DRAFT_BOUNDS: dict[str, Bound] = {
    "eagle": Bound(2e-5, 1.5e-3, "one decoder layer forward plus its launch/prep per drafted "
                   "position"),
    "eagle3": Bound(2e-5, 1.5e-3, "one decoder layer over fused features plus its launch/"
                    "prep per drafted position"),
    "mtp": Bound(2e-5, 2e-3, "the target's NextN layer per drafted position"),
    "block": Bound(2e-5, 3e-3, "one block-drafter forward (DFlash/DSpark) per step"),
    "draft-model": Bound(5e-5, 4e-3, "a separate model's forward (its own graph) per "
                         "drafted position"),
    "ngram": Bound(1e-6, 2e-3, "CPU n-gram lookup per step (no GPU forward)"),
}


RECORD_BOUNDS: dict[str, Bound] = {
    name: Bound(lo, hi, "a pair's own bench records may come from any machine (a CPU test "
                "host too): only what a positive, finite cost allows")
    for name, (lo, hi) in {"eta_bw": (0.01, 1.0), "eta_flops": (0.01, 1.0),
                           "forward_s": (1e-5, 1.0), "speculative_s": (1e-6, 1.0),
                           "draft_s": (1e-6, 1.0), "allreduce_s": (1e-6, 1e-3),
                           "token_s": (1e-7, 0.1), "moe_locality": (0.2, 1.0),
                           "layer_s": (1e-7, 1e-2), "moe_bw": (0.01, 1.0),
                           "host_link": (0.01, 1.0), "eta_prefill": (0.01, 1.0)}.items()}
"""Bounds for `specpair calibrate` on a pair's own records (not the published fits)."""


def bound_of(name: str, table: Mapping[str, Bound] | None = None) -> Bound:
    if table is not None:
        return table[name]
    if name.startswith("draft_s."):
        return DRAFT_BOUNDS[name.split(".", 1)[1]]
    return BOUNDS[name]


class StepParams(Strict):
    eta_bw: float = Field(gt=0, le=1, description="achieved share of the GPU's achievable "
                          "(bandwidth-test) bandwidth")
    eta_flops: float = Field(gt=0, le=1, description="achieved share of peak dense FLOP/s")
    forward_s: float = Field(ge=0, description="fixed cost of one target forward")
    speculative_s: float = Field(ge=0, description="fixed extra cost of a speculative step")
    draft_s: float = Field(ge=0, description="fixed cost of one draft forward (of the "
                                             "drafter family in use)")
    allreduce_s: float = Field(ge=0, description="one tensor-parallel all-reduce")
    token_s: float = Field(default=0.0, ge=0, description="per output token and sequence "
                           "(sampling, per-request bookkeeping), serial")
    moe_locality: float = Field(default=1.0, gt=0, le=1, description="ρ: one sequence's w "
                                "verify tokens touch experts like w^ρ independent tokens")
    layer_s: float = Field(default=0.0, ge=0, description="fixed cost per decoder layer "
                           "and forward (kernel boundaries), serial")
    moe_bw: float = Field(default=1.0, gt=0, le=1, description="share of the dense "
                          "kernels' bandwidth the routed experts' reads reach")
    eta_prefill: float = Field(default=0.7, gt=0, le=1, description="achieved share of "
                               "peak dense FLOP/s of prefill's large GEMMs")
    host_link: float = Field(default=1.0, gt=0, le=1, description="share of the measured "
                             "host-staged link figure (`LINKS` *-host) a deployment's "
                             "all-reduces through host memory reach")

    def describe(self) -> str:
        return (f"η_bw {self.eta_bw:.2f}, η_f {self.eta_flops:.2f}, per forward "
                f"{self.forward_s * 1e3:.2f} ms, per speculative step "
                f"{self.speculative_s * 1e3:.2f} ms, per draft forward "
                f"{self.draft_s * 1e3:.2f} ms, per all-reduce {self.allreduce_s * 1e6:.0f} µs, "
                f"per output token {self.token_s * 1e6:.1f} µs, per layer "
                f"{self.layer_s * 1e6:.1f} µs, expert-routing locality ρ "
                f"{self.moe_locality:.2f}, routed-expert bandwidth share {self.moe_bw:.2f}"
                + (f", host-staged link at {self.host_link:.2f} of its measured figure"
                   if self.host_link != 1.0 else ""))


@dataclass(frozen=True)
class FitResult:
    values: dict[str, float]
    at_bound: dict[str, str]   # parameter → "lower" / "upper"
    cost: float


PRIOR_WEIGHT = 0.1
"""Each free parameter also pays (0.1 · ln(value / prior))²: a weak pull to the prior that
keeps a parameter the points barely see at its prior and breaks ties between parameters
the points trade against each other (it matches one point's ln 2 residual only ×1000 off
the prior, so it never outvotes the data)."""


def fit_bounded(residuals: Callable[[Mapping[str, float]], Sequence[float]],
                start: Mapping[str, float], free: Sequence[str],
                prior_weight: float = PRIOR_WEIGHT,
                bounds: Mapping[str, Bound] | None = None) -> FitResult:
    """Least squares in log space within each parameter's physical `Bound`.

    scipy's trust-region-reflective solver keeps every iterate inside the box and is
    deterministic; a value within 0.5% (in log) of a bound is reported as on it."""
    import numpy as np
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    names = list(free)
    lo = np.array([math.log(bound_of(n, bounds).lo) for n in names])
    hi = np.array([math.log(bound_of(n, bounds).hi) for n in names])
    prior = np.array([min(max(math.log(start[n]), lo[i]), hi[i])
                      for i, n in enumerate(names)])

    def values(x: Iterable[float]) -> dict[str, float]:
        out = dict(start)
        out.update({n: math.exp(float(v)) for n, v in zip(names, x, strict=True)})
        return out

    def f(x: np.ndarray) -> np.ndarray:
        r = list(residuals(values(x)))
        return np.array(r + list(prior_weight * (x - prior)), dtype=float)

    x0 = np.clip(prior, lo + 1e-9, hi - 1e-9)
    if not names:
        return FitResult(dict(start), {}, float(np.sum(f(x0) ** 2)))
    res = least_squares(f, x0, bounds=(lo, hi), method="trf", x_scale=1.0,
                        diff_step=1e-4, xtol=1e-10, ftol=1e-10, max_nfev=400)
    at: dict[str, str] = {}
    for i, n in enumerate(names):
        span = 0.005 * max(hi[i] - lo[i], 1e-9)
        if res.x[i] <= lo[i] + span:
            at[n] = "lower"
        elif res.x[i] >= hi[i] - span:
            at[n] = "upper"
    fitted = {k: float(f"{v:.4g}") for k, v in values(res.x).items()}
    for n in names:  # rounding must not step outside the bound
        b = bound_of(n, bounds)
        fitted[n] = min(b.hi, max(b.lo, fitted[n]))
    return FitResult(fitted, at, float(res.cost))
