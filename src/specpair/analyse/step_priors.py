"""What the step fits start from: the priors of every parameter, and the parameters
measured outside the published points, which the fits of the GPU families they were
measured on take as given."""

from __future__ import annotations

from dataclasses import dataclass

from specpair.analyse.step_params import StepParams

MEASURED_MOE_BW = 0.82
"""Grouped-GEMM expert reads against a dense GEMV of the same bytes on an H200
(tests/fixtures/measured/h200_grouped_experts.json, benchmarks/device/grouped_experts_h200.py):
the ratio of their marginal bandwidths (slopes of time over bytes, 8-256 touched experts)
is 0.81 for DeepSeek-V3's TP-8 expert slice and 0.83 for Qwen3-30B-A3B's TP-2 one; their
fixed parts are what `layer_s` carries. `moe_bw` on Hopper (`MEASURED`), and the prior of
every other fit's. The dense GEMV's own share of the roof is not taken as measured:
`eta_bw` stays fitted (what was scored instead: site/docs/latency-model-notes.md)."""


@dataclass(frozen=True)
class Measured:
    """A parameter measured outside the published points, on the GPU families it was
    measured on: there the fits take it as given instead of fitting it."""

    value: float
    families: tuple[str, ...]
    why: str


MEASURED: dict[str, Measured] = {
    "moe_bw": Measured(MEASURED_MOE_BW, ("hopper",), (
        "the grouped GEMM's marginal read bandwidth as a share of a dense GEMV's on an "
        "H200, 0.81 and 0.83 for two expert shapes (DeepSeek-V3 at TP 8, Qwen3-30B-A3B at "
        "TP 2); H100 and H200 share the architecture and the engines' fused-MoE kernels. "
        "Other GPU families are not measured: their fits keep it free")),
}
"""Parameters the fits of a GPU family take as measured. Only on the families measured:
pulling every family's fit to the measurement gave other families implausible fixed
costs instead (leave-one-source-out scores of both: site/docs/latency-model-notes.md)."""

# Where no fit exists yet: plausible serving-engine figures inside every bound, labelled as
# such wherever used; they are also the priors every fit is pulled towards (weakly).
UNCALIBRATED = StepParams(eta_bw=0.8, eta_flops=0.6, forward_s=2e-3, speculative_s=1e-3,
                          draft_s=0.5e-3, allreduce_s=20e-6, token_s=10e-6, moe_locality=0.6,
                          layer_s=10e-6, moe_bw=MEASURED_MOE_BW, host_link=1.0,
                          eta_prefill=0.7)

DRAFT_PRIORS = {"eagle": 4e-4, "eagle3": 4e-4, "mtp": 4e-4, "block": 6e-4,
                "draft-model": 8e-4, "ngram": 1e-4}

SHARED = ("eta_bw", "eta_flops", "forward_s", "speculative_s", "allreduce_s", "token_s",
          "moe_locality", "layer_s", "moe_bw", "host_link", "eta_prefill")
