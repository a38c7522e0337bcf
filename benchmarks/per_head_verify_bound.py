"""What a lower bound on the per-query-head verify kernel does to the points refused for it
(`published_points.PER_HEAD_VERIFY`): whether its certain part alone decides their sweep.

    python benchmarks/per_head_verify_bound.py

For each refused sweep, with the fits made without its source (leave-one-source-out, as
stored), the verify of every point is charged the kernel's excess over the step model's
one-pass attention, at its least:

- each sequence's KV is read once per query head instead of once: (heads − 1) extra reads,
  at no more than the GPU's measured L2 bandwidth, whether L2 holds them or not;
- BLOCK_M query rows are computed where w are verified: the padded rows' attention FLOPs
  at the fitted GEMM efficiency of the BF16 peak;

blended as every kernel is (`stepmodel.blend`). τ is anchored on the sweep's first point
(as the validation does) and the last point's speedup is predicted with it. Only a kernel
timing (benchmarks/device/triton_verify_mla.py) gives the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scipy.optimize import brentq

from specpair.analyse import (
    calibration_data,
    cross_validation,
    evaluation_rows,
    point_prediction,
    published_points,
    step_params,
)
from specpair.analyse.stepmodel import blend

L2_BANDWIDTH = {"H200-141GB": (9.5e12, 10.5e12)}
"""Measured L2 read bandwidth, bytes/s: RRZE-HPC/gpu-benches gpu-l2-cache/h200.txt
(@3088b333, April 2024), 10.5 TB/s at a 5 MB working set, 9.5 around 37-40 MB."""

BLOCK_M = 32  # SGLang v0.4.4 extend_attention_fwd on sm90 for a 576-wide MLA query


def excess(point: published_points.Point, params: step_params.StepParams,
           data: calibration_data.CalibrationData, batch: int, l2: float) -> float:
    target = data.models[point.target]
    fwd, _, hw = point_prediction._forwards(point, target, None)
    heads = target.heads // point.tp
    w = point.shape.verify
    rows = math.ceil(w / BLOCK_M) * BLOCK_M
    rereads = batch * point.context * fwd.kv_bytes_per_token * (heads - 1)
    padded = fwd.attention_flops_per_context_token * point.context * batch * (rows - w)
    return blend(rereads / l2, padded / (params.eta_flops * hw.bf16_flops))


@dataclass(frozen=True)
class Bounded:
    sweep: str
    l2: float                 # bytes/s the extra reads were charged at
    published: tuple[float, float]   # the sweep's first and last speedup
    batches: tuple[int, int]
    extra_s: float            # the bound's excess on the last point's verify
    tau: float                # anchored on the first point, the bound included
    predicted_last: float


def sweep_bounds() -> list[Bounded]:
    """The refused sweeps, each predicted with the lower bound of its verify kernel."""
    data = calibration_data.load()
    loso = cross_validation.stored_loso_fits()
    refused = [p for p in data.points
               if p.refusal and p.refusal.name == published_points.PER_HEAD_VERIFY and p.sweep]
    out = []
    for sweep in sorted({p.sweep for p in refused if p.sweep}):
        pts = sorted((p for p in refused if p.sweep == sweep), key=lambda p: p.concurrency)
        first, last = pts[0], pts[-1]
        assert first.speedup and last.speedup
        params, *_ = evaluation_rows._fit_label(loso[first.source_key],
                                                calibration_data.family_of(first.gpu), first.engine)
        if first.gpu not in L2_BANDWIDTH:  # no guess: the bound needs a measured figure
            raise SystemExit(f"{sweep}: no measured L2 bandwidth for {first.gpu}; add a "
                             "published measurement, with its source, to L2_BANDWIDTH")
        for l2 in L2_BANDWIDTH[first.gpu]:
            t1 = point_prediction.times_at(first, params, data)
            t1 = replace(t1, verify=t1.verify + excess(first, params, data, first.batch, l2))
            tau = brentq(lambda t, s=t1, goal=first.speedup: s.speedup(t) - goal, 1.0,
                         float(first.shape.max_tokens))
            extra = excess(last, params, data, last.batch, l2)
            tn = point_prediction.times_at(last, params, data)
            tn = replace(tn, verify=tn.verify + extra)
            out.append(Bounded(sweep, l2, (first.speedup, last.speedup),
                               (first.batch, last.batch), extra, tau, tn.speedup(tau)))
    return out


def main() -> None:
    for b in sweep_bounds():
        print(f"{b.sweep}: published {b.published[0]} -> {b.published[1]} (batch "
              f"{b.batches[0]} -> {b.batches[1]}); L2 {b.l2 / 1e12:.1f} TB/s: verify "
              f"+{b.extra_s * 1e3:.2f} ms at batch {b.batches[1]}, anchored tau {b.tau:.3f}, "
              f"predicted {b.published[0]} -> {b.predicted_last:.3f}")


if __name__ == "__main__":
    main()
