"""Predictions of one candidate at any concurrency: the step model's times, throughput,
TTFT and break-even, for a fixed depth or a schedule's depth at each concurrency."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from specpair.analyse import calibrated_params
from specpair.analyse.acceptance import AcceptanceCurve
from specpair.analyse.step_params import StepParams
from specpair.analyse.stepmodel import (
    Forward,
    Hardware,
    StepTimes,
    forward_time,
    memo_step_times,
    shape_for,
)
from specpair.engines.schedule_model import ResolvedSchedule
from specpair.model.memo import value_memo


@dataclass(frozen=True)
class Operating:
    concurrency: int
    per_request: float   # output tokens per second per request
    throughput: float    # output tokens per second, one replica
    tpot_s: float
    ttft_s: float
    break_even: float | None
    depth: int | None = None     # a schedule's K at this concurrency
    tau_slo: float | None = None  # the SLO at that K


@value_memo  # frozen forwards, hardware and parameters: every candidate's evaluator asks
def _prefill_s(fwd: Forward, prompt: int, hw: Hardware, p: StepParams, fixed: float) -> float:
    return forward_time(fwd, 1, prompt, prompt // 2, hw, p, fixed)


@dataclass
class Evaluator:
    """Predictions for one candidate at any concurrency (pure, cheap)."""

    target: Forward
    draft: Forward | None
    shape: Any
    hw: Hardware
    params: StepParams
    context: int
    prompt: int
    tau: float | None
    speedup_band: calibrated_params.Interval | None = None
    throughput_band: calibrated_params.Interval | None = None
    _prefill: float = 0.0

    def __post_init__(self) -> None:
        p = self.params
        self._prefill = _prefill_s(self.target, self.prompt, self.hw, p, p.forward_s)
        if self.draft is not None and self.tau is not None:
            self._prefill += _prefill_s(self.draft, self.prompt, self.hw, p, p.draft_s)

    def times(self, batch: int) -> StepTimes:
        return memo_step_times(self.target, self.draft if self.tau is not None else None,
                          self.shape, batch, self.context, self.hw, self.params)

    def throughput_ratio(self) -> tuple[float, float]:
        """predicted / true throughput, 10th-90th percentile: the baseline band, and for a
        draft the speedup band on top."""
        lo = hi = 1.0
        if self.throughput_band is not None:
            lo, hi = self.throughput_band.ratio_lo, self.throughput_band.ratio_hi
        if self.tau is not None and self.speedup_band is not None:
            lo, hi = lo * self.speedup_band.ratio_lo, hi * self.speedup_band.ratio_hi
        return lo, hi

    def at(self, batch: int) -> Operating:
        t = self.times(batch)
        if self.tau is None:
            step, tokens, even = t.decode, 1.0, None
        else:
            step, tokens, even = t.speculative(self.tau), self.tau, t.break_even()
        per_request = tokens / step
        # TTFT: the prompt's prefill (target, and the draft's own pass over it) plus the
        # step it waits for; queueing is not modelled
        return Operating(batch, per_request, per_request * batch, 1 / per_request,
                         self._prefill + step, even)


@dataclass
class ScheduledEvaluator(Evaluator):
    """A schedule's predictions: at each concurrency the K its ranges give there (vLLM's
    lookup: past the last range, its K), with that depth's shape and acceptance; at K = 0
    the target's decode step slowed by the engine's published K = 0 cost (`k0_slowdown`:
    1 + the upper end of that cost, as the schedule prices it; 1 where unmodelled)."""

    schedule: ResolvedSchedule | None = None
    method: str = ""
    curve: AcceptanceCurve | None = None
    slo_curve: AcceptanceCurve | None = None
    k0_slowdown: float = 1.0

    def at(self, batch: int) -> Operating:
        assert self.schedule is not None and self.curve is not None
        k = self.schedule.k_at(batch)
        tau = self.curve.tau(k) if k else None
        shape = shape_for(self.method, k, None, None, 1, None) if k else self.shape
        fixed = replace(self, tau=tau, shape=shape)  # a plain Evaluator of this depth
        op = Evaluator.at(fixed, batch)
        if not k and self.k0_slowdown != 1.0:  # drafting off, the draft still loaded
            step = op.tpot_s * self.k0_slowdown
            op = replace(op, per_request=1 / step, throughput=batch / step, tpot_s=step,
                         ttft_s=op.ttft_s + step - op.tpot_s)
        slo = self.slo_curve.tau(k) if k and self.slo_curve is not None else None
        return replace(op, depth=k, tau_slo=slo)
