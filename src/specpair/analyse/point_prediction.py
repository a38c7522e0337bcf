"""One published point predicted with the step model (`specpair.analyse.stepmodel`): its
forwards described as a runbook's are, its GPU as the step model sees it, its step times
and the throughputs and speedup in the point's own terms."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from specpair.analyse.calibration_data import CalibrationData
from specpair.analyse.published_points import CalibrationError, ModelSpec, Point
from specpair.analyse.step_links import link_for
from specpair.analyse.step_params import StepParams
from specpair.analyse.stepmodel import (
    Forward,
    Hardware,
    Prefill,
    Shape,
    StepTimes,
    decode_time,
    step_times,
)
from specpair.facts import hardware


def hardware_of(gpu_key: str, p2p: bool | None = None) -> Hardware:
    gpu = hardware.lookup(gpu_key)
    if gpu is None:
        raise CalibrationError(f"unknown GPU {gpu_key!r}: {hardware.unknown_hint(gpu_key)}")
    return hardware_for(gpu, p2p)


def hardware_for(gpu: hardware.GPU, p2p: bool | None = None) -> Hardware:
    """The step model's view of a GPU, one path for a calibration point and a runbook: a
    runbook's NVFP4 target on Blackwell meets the FP4 tensor peak as the points' did. Its
    memory roof is the GPU's achievable bandwidth (measured, else assumed: `hardware`), of
    which `eta_bw` is the share decode kernels reach."""
    return Hardware(gpu.achievable_bandwidth_bytes_per_s, gpu.bf16_dense_flops,
                    gpu.fp8_dense_flops, link_for(gpu, p2p),
                    gpu.fp4_dense_flops)


@dataclass(frozen=True)
class Prediction:
    baseline_tok_s: float
    speculative_tok_s: float | None
    speedup: float | None
    tau_used: float | None
    tau_anchored: bool
    baseline_tpot_tok_s: float | None = None  # as a TPOT counts it (own prefill excluded)


def _prefill(point: Point, batch: int, share: float) -> Prefill | None:
    """The prompts that ride along with the decode steps of the point's benchmark (its
    published mean prompt and output lengths), or None where they are not published."""
    if not point.input_len or not point.output_len or point.prefill_disaggregated:
        return None
    share = share if share >= 0 else (batch - 1) / batch
    return Prefill(point.input_len / point.output_len, share, round(point.input_len))


def times_at(point: Point, params: StepParams, data: CalibrationData,
             batch: int | None = None, share: float = 1.0) -> StepTimes:
    """One replica's step times at `batch` sequences (default the point's): the same
    model description path as a runbook's. `share` of the replacing requests' prompts
    ride along (1: a throughput over wall time; −1: a TPOT, which leaves out the
    request's own prefill, (B − 1)/B)."""
    target_fwd, draft_fwd, hw = _forwards_of(point, data)
    b = batch or point.batch
    return step_times(target_fwd, draft_fwd, point.shape, b, point.context, hw, params,
                      _prefill(point, b, share))


def speculative_times(point: Point, params: StepParams, data: CalibrationData,
                      times: StepTimes) -> StepTimes:
    """Step times of the speculative run: at its own batch where its engine capped it."""
    if point.speculative_batch == point.batch:
        return times
    return times_at(point, params, data, point.speculative_batch)


@cache  # points and model specs are frozen: a fit evaluates each point hundreds of times
def _forwards(point: Point, target: ModelSpec, draft: ModelSpec | None
              ) -> tuple[Forward, Forward | None, Hardware]:
    target_fwd = target.served_as(point.target_dtype).architecture().forward(
        point.tp, point.ep, dp_attention=point.dp_attention)
    draft_fwd = None
    if draft is not None:
        d_tp = point.draft_tp or (1 if point.dp_attention else point.tp)
        draft_fwd = draft.served_as(point.draft_dtype).architecture().forward(d_tp)
    return target_fwd, draft_fwd, hardware_of(point.gpu, point.gpu_p2p)


@dataclass(frozen=True)
class Setup:
    """What predicting a point needs that no step parameter changes: its forwards, GPU,
    step shape, batches and ride-along prompts. A fit predicts every point thousands of
    times; `setup` derives these once (`predict` is `predict_setup` of a fresh one)."""

    point: Point
    target: Forward
    draft: Forward | None
    hw: Hardware
    shape: Shape
    batch: int
    speculative_batch: int
    prefill: Prefill | None             # share 1 at the point's batch (a throughput)
    tpot_prefill: Prefill | None        # share −1 at the point's batch (a TPOT)
    speculative_prefill: Prefill | None  # share 1 at the speculative batch


def _forwards_of(point: Point, data: CalibrationData
                 ) -> tuple[Forward, Forward | None, Hardware]:
    draft = data.models[point.draft] if point.draft else None
    return _forwards(point, data.models[point.target], draft)


def setup(point: Point, data: CalibrationData) -> Setup:
    target_fwd, draft_fwd, hw = _forwards_of(point, data)
    batch, speculative_batch = point.batch, point.speculative_batch
    return Setup(point, target_fwd, draft_fwd, hw, point.shape, batch, speculative_batch,
                 _prefill(point, batch, 1.0), _prefill(point, batch, -1.0),
                 _prefill(point, speculative_batch, 1.0))


def predict(point: Point, params: StepParams, data: CalibrationData,
            tau: float | None = None) -> Prediction:
    """Throughputs (in the point's throughput scope) and speedup at the point; `tau`
    replaces the published τ (anchoring)."""
    return predict_setup(setup(point, data), params, tau)


def predict_setup(s: Setup, params: StepParams, tau: float | None = None) -> Prediction:
    """`predict` of a point whose `setup` is already derived."""
    point = s.point
    used = tau if tau is not None else point.tau
    times = step_times(s.target, s.draft, s.shape, s.batch, point.context, s.hw, params,
                       s.prefill)
    base = point.published_scale(s.batch / times.decode)
    tpot = None
    if point.baseline_tpot_ms:
        decode = decode_time(s.target, s.batch, point.context, s.hw, params, s.tpot_prefill)
        tpot = point.published_scale(s.batch / decode)
    if used is None or point.method is None:
        return Prediction(base, None, None, None, False, tpot)
    sb = s.speculative_batch
    st = times if sb == s.batch else step_times(
        s.target, s.draft, s.shape, sb, point.context, s.hw, params, s.speculative_prefill)
    spec = point.published_scale(sb * used / st.speculative(used), sb)
    return Prediction(base, spec, spec / base, used, tau is not None, tpot)


def baseline_ratio(point: Point, pred: Prediction) -> float | None:
    """Predicted / published baseline: from TPOT where published (the step model times
    decode steps; a benchmark's output throughput also counts prefill and TTFT), else
    from the throughput."""
    if point.baseline_tpot_ms:
        tok_s = pred.baseline_tpot_tok_s if pred.baseline_tpot_tok_s is not None \
            else pred.baseline_tok_s
        per_seq = tok_s if point.throughput_scope == "per_user" else None
        if per_seq is None:
            per_seq = tok_s / point.published_scale(point.batch)
        return per_seq * point.baseline_tpot_ms / 1e3
    return pred.baseline_tok_s / point.baseline_tok_s if point.baseline_tok_s else None
