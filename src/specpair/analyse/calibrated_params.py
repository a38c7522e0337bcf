"""What a deployment is given: the stored fit of its GPU family × engine (else the
engine's pooled fit, else the uncalibrated defaults), and the cross-validated error band
of its GPU family × engine × drafter family, each saying where it came from."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from specpair.analyse.calibration_data import (
    POOLED,
    CalibrationData,
    ErrorBand,
    Fitted,
    load,
)
from specpair.analyse.step_params import StepParams
from specpair.analyse.step_priors import DRAFT_PRIORS, UNCALIBRATED
from specpair.analyse.stepmodel import drafter_family


@dataclass(frozen=True)
class Chosen:
    params: StepParams
    provenance: str


def pick_fit(fits: Sequence[Fitted], family: str | None, engine: str
             ) -> tuple[Fitted | None, str]:
    for f in fits:
        if f.family == family and f.engine == engine:
            return f, "own"
    for f in fits:
        if f.family == POOLED and f.engine == engine:
            return f, "pooled"
    return None, "none"


_CHOSEN: dict[tuple[str | None, str, str | None], tuple[CalibrationData, Chosen]] = {}


def params_for(family: str | None, engine: str, method: str | None = None) -> Chosen:
    """The fitted parameters for a GPU family × engine (the per-draft-forward cost of the
    method's drafter family); else the same engine's fit of another family (named); else
    the uncalibrated defaults (said so).

    Once per stored calibration (`load()`'s data, held with the answer: a reload is asked
    again): the planner's and the gate's candidates ask for the same ones every time."""
    data, key = load(), (family, engine, method)
    held = _CHOSEN.get(key)
    if held is None or held[0] is not data:
        held = _CHOSEN[key] = (data, _params_for(data, family, engine, method))
    return held[1]


def _params_for(data: CalibrationData, family: str | None, engine: str,
                method: str | None) -> Chosen:
    drafter = drafter_family(method) if method else "none"
    f, how = pick_fit(data.fitted, family, engine)
    if f is None:
        return Chosen(UNCALIBRATED.model_copy(update={"draft_s": DRAFT_PRIORS.get(
            drafter, UNCALIBRATED.draft_s)}),
            f"uncalibrated defaults (no published measurements for {engine})")
    draft_note = "" if drafter == "none" or drafter in f.draft_s else (
        f"; no {drafter} points there: its per-draft-forward cost is the prior")
    if how == "own":
        return Chosen(f.for_drafter(drafter),
                      f"fitted on published {family} × {engine} measurements "
                      f"({len(f.fitted_on)} points, data/calibration.yaml){draft_note}")
    where = f"GPU family {family}" if family else "a GPU declared inline"
    return Chosen(f.for_drafter(drafter),
                  f"too few published {engine} measurements on {where}: {engine}'s fit "
                  f"pooled across GPU families {', '.join(f.pooled_from)} "
                  f"({len(f.fitted_on)} points; efficiencies as shares of this GPU's own "
                  f"bandwidth and peaks, per-forward costs as {engine}'s)"
                  f"{draft_note}")


MIN_BAND_POINTS = 6
"""Fewer cross-validated points than this in a GPU family × engine × drafter family: the
band is borrowed from the wider pool (same engine × drafter, then the engine, then all)
and widened ×1.5 in log, and labelled so."""

WIDEN = 1.5


@dataclass(frozen=True)
class Interval:
    """Where the true value lies, given the model's: [value / ratio_hi, value / ratio_lo]
    (ratio = predicted / published, cross-validated).

    The ratios always bracket 1, so the interval contains the point estimate it is
    printed beside: where the cross-validated ratios of a group all lie on one side of 1
    (a bias), the interval reaches from the estimate to where the bias says the truth
    lies, instead of excluding the estimate (`ErrorBand` keeps the raw quantiles)."""

    ratio_lo: float
    ratio_hi: float
    n: int
    label: str
    few: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "ratio_lo", min(self.ratio_lo, 1.0))
        object.__setattr__(self, "ratio_hi", max(self.ratio_hi, 1.0))

    def around(self, value: float) -> tuple[float, float]:
        return value / self.ratio_hi, value / self.ratio_lo

    def around_inverse(self, value: float) -> tuple[float, float]:
        """For a quantity inversely proportional to the predicted one (τ*, TPOT)."""
        return value * self.ratio_lo, value * self.ratio_hi

    def overlaps(self, a: float, b: float) -> bool:
        """Whether the intervals of two predictions made with this band overlap."""
        lo_a, hi_a = self.around(a)
        lo_b, hi_b = self.around(b)
        return lo_a <= hi_b and lo_b <= hi_a


def _pooled(bands: Sequence[ErrorBand]) -> tuple[float, float, int]:
    """A pooled band: n-weighted log quantiles."""
    n = sum(b.n for b in bands)
    lo = sum(b.n * math.log(b.ratio_lo) for b in bands) / n
    hi = sum(b.n * math.log(b.ratio_hi) for b in bands) / n
    return lo, hi, n


_INTERVALS: dict[tuple[str | None, str, str, str], tuple[CalibrationData, Interval]] = {}


def interval(family: str | None, engine: str, drafter: str,
             quantity: Literal["speedup", "throughput"],
             bands: Sequence[ErrorBand] | None = None) -> Interval:
    """The cross-validated band of a GPU family × engine × drafter family; with few or no
    points, the wider pool's band widened and labelled. The stored bands' answers are kept
    per stored calibration, as `params_for`'s are."""
    if bands is not None:
        return _interval(family, engine, drafter, quantity, bands)
    data, key = load(), (family, engine, drafter, quantity)
    held = _INTERVALS.get(key)
    if held is None or held[0] is not data:
        held = _INTERVALS[key] = (data, _interval(family, engine, drafter, quantity,
                                                  data.cross_validated))
    return held[1]


def _interval(family: str | None, engine: str, drafter: str,
              quantity: Literal["speedup", "throughput"],
              bands: Sequence[ErrorBand]) -> Interval:
    bands = list(bands)
    mine = [b for b in bands if b.quantity == quantity]
    if quantity == "throughput":
        drafter = "none"
    own = [b for b in mine if (b.family, b.engine, b.drafter) == (family, engine, drafter)]
    name = f"{family or 'inline GPU'} × {engine} × {drafter}"
    if own and own[0].n >= MIN_BAND_POINTS:
        b = own[0]
        return Interval(b.ratio_lo, b.ratio_hi, b.n,
                        f"cross-validated on {b.n} published {name} points", False)
    have = own[0].n if own else 0
    for pool, what in (([b for b in mine if (b.engine, b.drafter) == (engine, drafter)],
                        f"{engine} × {drafter} on all GPU families"),
                       ([b for b in mine if b.engine == engine], f"all {engine} points"),
                       (mine, "all published points")):
        if sum(b.n for b in pool) >= MIN_BAND_POINTS:
            lo, hi, n = _pooled(pool)
            mid = (lo + hi) / 2
            half = max((hi - lo) / 2, 0.05) * WIDEN
            return Interval(round(math.exp(mid - half), 4), round(math.exp(mid + half), 4), n,
                            f"few points ({have} for {name}): {what}' band ({n} points), "
                            f"widened ×{WIDEN:g}", True)
    return Interval(0.6, 1.6, 0, f"no cross-validated points for {name}: ×0.6–×1.6 assumed",
                    True)
