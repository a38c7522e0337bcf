"""Comparing two candidates by their ratio under the model that scored them both.

Candidates scored by one step model (one fit, one error band) share its systematic error:
where the model over-predicts one H100 TP4 deployment by 8% it over-predicts its KV-dtype
twin by about as much. Their absolute intervals then overlap while the model still orders
them, so overlap is the wrong tie rule; the error of their *ratio* is what decides. That
error is measured, not assumed: within one published source (one GPU, engine and target),
the cross-validated predicted / published ratios of two points divide into the error the
model makes on their ratio (`paired_bands`). Candidates scored with different fits or bands
(another GPU family) share nothing, and their ratio carries both absolute bands."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from specpair.analyse.cross_validation import stored_cross_validation
from specpair.analyse.evaluation import Row as PointRow
from specpair.analyse.plan.evaluators import Evaluator
from specpair.analyse.plan.results import Row


@dataclass(frozen=True)
class PairedBands:
    """Half-widths, in log, of the 10th-90th percentile of the model's error on the ratio
    of two points of one source: of two speedups, and of two baseline throughputs."""

    speedup: float
    throughput: float
    speedup_pairs: int
    throughput_pairs: int

    def describe(self) -> str:
        return (f"paired error of the shared model, 10th-90th percentile of predicted / "
                f"published ratios of two points of one published source: speedup "
                f"×{math.exp(self.speedup):.3f} ({self.speedup_pairs} pairs), throughput "
                f"×{math.exp(self.throughput):.3f} ({self.throughput_pairs} pairs)")


def _half_width(logs: list[float]) -> float:
    """The 10th-90th percentile half-width of the signed log ratios (each pair in both
    orders, so the distribution is symmetric and the half-width is its 80th percentile of
    |log|), by linear interpolation."""
    v = sorted(abs(x) for x in logs)
    if not v:
        return 0.0
    pos = 0.8 * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _within_source(rows: Iterable[PointRow], speedup: bool) -> list[float]:
    groups: dict[tuple[str, ...], dict[tuple[object, ...], float]] = {}
    for r in rows:
        value = r.ratio if speedup else r.baseline_ratio
        if value is None or value <= 0 or (speedup and r.tau_anchored):
            continue  # an anchored τ makes its ratio 1 by construction
        key = (r.source, r.gpu, r.engine, r.target) + ((r.drafter,) if speedup else ())
        # a baseline run several speculative points compare with is one measurement
        run: tuple[object, ...] = (r.id,) if speedup else (
            r.concurrency, r.published_baseline if r.published_baseline is not None
            else round(value, 3))
        groups.setdefault(key, {}).setdefault(run, value)
    return [math.log(a / b) for runs in groups.values()
            for a, b in itertools.combinations(runs.values(), 2)]


MIN_PAIRS = 30
"""Fewer within-source pairs than this on a GPU family × engine: all published pairs."""


@functools.cache
def paired_bands(family: str | None, engine: str) -> PairedBands:
    """The bands of this GPU family × engine, each from all published pairs where it has
    fewer than `MIN_PAIRS`."""
    rows = stored_cross_validation().rows
    own = [r for r in rows if r.family == family and r.engine.split()[0] == engine]
    out = []
    for speedup in (True, False):
        logs = _within_source(own, speedup)
        if len(logs) < MIN_PAIRS:
            logs = _within_source(rows, speedup)
        out.append(logs)
    return PairedBands(_half_width(out[0]), _half_width(out[1]), len(out[0]), len(out[1]))


@dataclass(frozen=True)
class Comparison:
    """a / b, and where the true ratio lies (10th-90th percentile)."""

    ratio: float
    lo: float
    hi: float

    @property
    def resolved(self) -> bool:
        """Whether the model orders the two: the ratio's interval excludes 1."""
        return not self.lo <= 1.0 <= self.hi


def _same_deployment(a: Row, b: Row) -> bool:
    return (a.gpu, a.tensor, a.kv_cache_dtype, a.memory_fraction, a.concurrency,
            a.replicas) == (b.gpu, b.tensor, b.kv_cache_dtype, b.memory_fraction,
                            b.concurrency, b.replicas)


def _own(ev: Evaluator) -> tuple[float, float]:
    """A speculative candidate's speedup band in log (down ≤ 0, up ≥ 0) of the truth
    around the prediction: nothing of it is shared with the target alone."""
    if ev.tau is None or ev.speedup_band is None:
        return 0.0, 0.0
    return -math.log(ev.speedup_band.ratio_hi), -math.log(ev.speedup_band.ratio_lo)


def _absolute(r: Row) -> tuple[float, float]:
    lo, hi = r.tokens_per_s_per_gpu_range
    p = r.tokens_per_s_per_gpu or 1.0
    return math.log(max(lo, 1e-9) / p), math.log(max(hi, 1e-9) / p)


def compare(a: Row, b: Row, ev_a: Evaluator, ev_b: Evaluator, value: float, other: float,
            bands: PairedBands) -> Comparison:
    """`value` of `a` against `other` of `b` (tokens/s per GPU or per request: the same
    relative error), with the interval of the true ratio. Independent parts of the error
    add in quadrature."""
    parts: list[tuple[float, float]] = []
    if (a.params_source, a.validation) != (b.params_source, b.validation):
        lo_b, hi_b = _absolute(b)
        parts += [_absolute(a), (-hi_b, -lo_b)]  # two models: nothing cancels
    else:
        if not _same_deployment(a, b):
            parts.append((-bands.throughput, bands.throughput))
        spec_a, spec_b = a.depth > 0, b.depth > 0
        if spec_a and spec_b and a.shape != b.shape:
            parts.append((-bands.speedup, bands.speedup))
        elif spec_a != spec_b:  # one speedup against none: its whole band
            down, up = _own(ev_a) if spec_a else _own(ev_b)
            parts.append((down, up) if spec_a else (-up, -down))
    down = -math.sqrt(sum(d * d for d, _ in parts))
    up = math.sqrt(sum(u * u for _, u in parts))
    q = value / other if other else math.inf
    return Comparison(q, q * math.exp(down), q * math.exp(up))
