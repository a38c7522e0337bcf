"""The step model's roofline against a GPU's own timings, not against our formula.

tests/fixtures/measured/h200_gemm_roofline.json is what one NVIDIA H200 SXM did
(benchmarks/device/roofline_h200.py, 2026-12-04, torch 2.11.0+cu130, cuBLAS BF16): a
streaming read of 4 GiB, and y = x·Wᵀ for four serving-shaped weight matrices at M = 1 …
4096 rows, each the median of 30 CUDA-graph replays with L2 flushed in between. The roofs
of each shape are its own: the M = 1 bandwidth and the best FLOP rate of the sweep.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pytest

from specpair.analyse import calibration_data, step_fits, step_priors
from specpair.analyse.step_params import BOUNDS
from specpair.analyse.stepmodel import ROOFLINE_NORM, blend
from specpair.facts import hardware
from tests.support.paths import REPO

MEASURED = json.loads((REPO / "tests" / "fixtures" / "measured" / "h200_gemm_roofline.json")
                      .read_text())


def _shapes() -> dict[tuple[int, int], list[dict[str, float]]]:
    out: dict[tuple[int, int], list[dict[str, float]]] = defaultdict(list)
    for row in MEASURED["gemm"]:
        out[(row["n"], row["k"])].append(row)
    return out


def _rms_log_error(norm: float, rows: list[dict[str, float]]) -> float:
    bandwidth = rows[0]["bytes"] / rows[0]["seconds"]  # M = 1: a pure weight read
    peak = max(r["flops"] / r["seconds"] for r in rows)
    errors = [math.log(r["seconds"] / blend(r["bytes"] / bandwidth, r["flops"] / peak, norm))
              for r in rows]
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def test_the_measurement_is_an_h200_sweep_across_the_ridge() -> None:
    assert MEASURED["gpu"] == "NVIDIA H200"
    for rows in _shapes().values():
        ms = [r["m"] for r in rows]
        assert ms[0] == 1 and max(ms) >= 2048  # both roofs inside the sweep


def test_the_blend_times_every_measured_gemm_within_six_percent_rms() -> None:
    for shape, rows in _shapes().items():
        assert _rms_log_error(ROOFLINE_NORM, rows) < 0.06, shape


def test_the_blend_beats_both_the_larger_roof_and_the_two_norm() -> None:
    """Near the ridge the GEMMs run 1.16-1.30 × the larger roof: max undercharges them,
    the 2-norm's √2 overcharges them."""
    rows = [r for shape_rows in _shapes().values() for r in shape_rows]
    shapes = list(_shapes().values())

    def overall(norm: float) -> float:
        return math.sqrt(sum(_rms_log_error(norm, s) ** 2 for s in shapes) / len(shapes))

    assert len(rows) == 80
    assert overall(ROOFLINE_NORM) < 0.8 * overall(2.0)
    assert overall(ROOFLINE_NORM) < 0.8 * overall(64.0)  # ≈ max


def test_the_compute_bound_admits_the_best_measured_gemm_and_little_more() -> None:
    """η_f's upper bound against the sweep's best BF16 rate on the H200's 989 TFLOP/s
    datasheet peak (gpus.yaml): cuBLAS reaches 0.78-0.82 at M = 2048-4096; the bound
    allows that and no more than a few percent beyond."""
    h200 = hardware.lookup("H200-141GB")
    assert h200 is not None
    best = max(r["flops"] / r["seconds"] for r in MEASURED["gemm"]) / h200.bf16_dense_flops
    assert best <= BOUNDS["eta_flops"].hi <= best * 1.1, best


FP8 = json.loads((REPO / "tests" / "fixtures" / "measured" / "h200_fp8_gemm.json").read_text())
"""benchmarks/device/fp8_gemm_h200.py on the same kind of H200 (2026-12-04): E4M3 weights
and activations with per-tensor scales through torch._scaled_mm, beside BF16, for three
serving shapes at M = 1-8192 rows."""


def test_fp8_weights_reach_their_own_peak_not_bf16s() -> None:
    """FP8 GEMMs run at 1.8× BF16's best rate, so an FP8 target's FLOPs charged at the BF16
    peak would be timed 1.8× too slow; against each dtype's own datasheet peak the two
    reach shares within 10% of each other (0.74 and 0.80), so one η_f serves both."""
    h200 = hardware.lookup("H200-141GB")
    assert h200 is not None and h200.fp8_dense_flops is not None
    best_fp8 = max(r["fp8_flops"] / r["fp8_seconds"] for r in FP8["gemm"])
    best_bf16 = max(r["flops"] / r["bf16_seconds"] for r in FP8["gemm"])
    assert best_fp8 / best_bf16 > 1.7
    share_fp8 = best_fp8 / h200.fp8_dense_flops
    share_bf16 = best_bf16 / h200.bf16_dense_flops
    assert abs(share_fp8 / share_bf16 - 1) < 0.1, (share_fp8, share_bf16)


GROUPED = json.loads((REPO / "tests" / "fixtures" / "measured" / "h200_grouped_experts.json")
                     .read_text())
"""benchmarks/device/grouped_experts_h200.py (2026-12-04): PyTorch's CUTLASS grouped GEMM
(torch._grouped_mm, BF16) over 8-256 touched experts of one TP rank's DeepSeek-V3 (TP 8)
and Qwen3-30B-A3B (TP 2) gate/up slice, one decode token each, against a dense GEMV reading
the same bytes. A proxy for the engines' fused-MoE kernels, which are not installed there."""


def test_no_hopper_fit_reads_experts_faster_than_a_measured_grouped_gemm() -> None:
    """`moe_bw` is the share of the dense kernels' bandwidth that expert reads reach. The
    grouped GEMM reaches 0.80-0.87 of the dense GEMV from 32 touched experts up (0.66-0.72
    at 8, where its launch dominates). The Hopper fits take the measured ratio
    (`step_priors.MEASURED`); none claims expert reads faster than the measured kernel's
    best."""
    shares = [r["dense_seconds"] / r["grouped_seconds"] for r in GROUPED["rows"]
              if r["grouped_seconds"]]
    assert len(shares) == 9 and max(shares) < 1.0
    for fit in calibration_data.load().fitted:
        if fit.family == "hopper":
            assert BOUNDS["moe_bw"].lo <= fit.params.moe_bw <= max(shares), fit.engine


def _slope(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) \
        / sum((x - mx) ** 2 for x in xs)


def test_moe_bw_prior_is_the_measured_ratio_of_marginal_bandwidths() -> None:
    """The prior a group without MoE points keeps for `moe_bw` is the grouped GEMM's
    marginal bandwidth (seconds per byte over 8-256 touched experts) as a share of the
    dense GEMV's, per measured expert shape: it lies between the shapes' ratios."""
    shapes: dict[str, list[dict[str, float]]] = defaultdict(list)
    for row in GROUPED["rows"]:
        shapes[row["shape"]].append(row)
    ratios = []
    for rows in shapes.values():
        sizes = [r["bytes"] for r in rows]
        ratios.append(_slope(sizes, [r["dense_seconds"] for r in rows])
                      / _slope(sizes, [r["grouped_seconds"] for r in rows]))
    assert len(ratios) == 2
    prior = step_priors.UNCALIBRATED.moe_bw
    assert min(ratios) - 0.01 <= prior <= max(ratios) + 0.01, (ratios, prior)
    assert step_priors.MEASURED["moe_bw"].value == prior  # one value: prior and measured


def test_hopper_fits_take_the_measured_read_share_and_other_families_fit_theirs() -> None:
    """The measured ratio is taken as given by the fits of the family it was measured on
    (Hopper: H100 and H200), not fitted there; a family it was not measured on fits its
    own wherever its points have a MoE target."""
    data = calibration_data.load()
    measured = step_priors.MEASURED["moe_bw"]
    assert measured.families == ("hopper",)
    moe_families = {calibration_data.family_of(p.gpu) for p in data.points
                    if data.models[p.target].experts and p.refusal is None}
    for fit in data.fitted:
        if fit.family == "hopper":
            assert "moe_bw" not in fit.free and fit.params.moe_bw == measured.value
        elif fit.family in moe_families or fit.family == calibration_data.POOLED:
            assert "moe_bw" in fit.free, (fit.family, fit.engine)


def test_a_group_takes_a_measured_parameter_only_where_every_point_is_of_its_family() -> None:
    """`identifiable` drops `moe_bw` for MoE points all on Hopper GPUs (H100 and H200),
    and keeps it free once a point of another family joins them (an engine's pool)."""
    data = calibration_data.load()
    moe = [p for p in data.points if data.models[p.target].experts and p.refusal is None]
    hopper = [p for p in moe if calibration_data.family_of(p.gpu) == "hopper"]
    other = next(p for p in moe if calibration_data.family_of(p.gpu) == "blackwell")
    assert {p.gpu for p in hopper} >= {"H100-80GB", "H200-141GB"}
    assert "moe_bw" not in step_fits.identifiable(hopper, data)
    assert "moe_bw" in step_fits.identifiable([*hopper, other], data)
    assert "moe_bw" in step_fits.identifiable([other], data)


def test_the_bandwidth_bound_lies_between_a_gemv_and_a_streaming_read() -> None:
    """η_bw's upper bound, a share of the H200's published bandwidth-test figure
    (gpus.yaml: BabelStream's fastest kernel), is no more than the card's streaming read
    reaches and no less than the decode GEMV's marginal rate (bytes per second of the extra
    bytes, the fixed costs being charged apart), both measured on an H200 here: neither
    excludes what a kernel does nor allows more."""
    h200 = hardware.lookup("H200-141GB")
    assert h200 is not None and h200.measured_bandwidth_bytes_per_s is not None
    roof = BOUNDS["eta_bw"].hi * h200.achievable_bandwidth_bytes_per_s
    stream = MEASURED["stream_read_bytes_per_s"]
    shapes: dict[str, list[dict[str, float]]] = defaultdict(list)
    for row in GROUPED["rows"]:
        shapes[row["shape"]].append(row)
    marginal = max(1 / _slope([r["bytes"] for r in rows], [r["dense_seconds"] for r in rows])
                   for rows in shapes.values())
    assert marginal <= roof <= stream, (marginal, roof, stream)
    # and the bound is that GEMV's rate, not a looser one
    assert roof == pytest.approx(marginal, rel=0.005)
