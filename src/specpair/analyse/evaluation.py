"""How well the step model predicts the published points: one row per point, each sweep's
direction, the figures per GPU family × engine × drafter family, and the summary the
latency-model page and `benchmarks/latency_validation.py` report."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from specpair.analyse.calibration_data import Fitted
from specpair.analyse.published_points import Point
from specpair.model.common import Strict

BAND = (0.8, 1.25)
"""Done-when band for predicted / published speedup."""

FLAT = 0.05
"""A published sweep whose last speedup is within ±5% of its first has no direction (that
is within run-to-run noise); a predicted trend's direction is the sign of its change."""

Mode = Literal["cross-validated", "in-sample", "as stored"]


class RefusedPoint(Strict):
    """A point whose deployment the step model refuses by name: listed, not predicted
    (and not fitted on)."""

    id: str
    source: str
    name: str
    reason: str


class Row(Strict):
    id: str
    role: str
    source: str = Field(description="the independent source (leave-one-source-out key)")
    gpu: str
    family: str
    engine: str
    drafter: str
    target: str
    draft: str | None
    shape: str
    depth: int
    concurrency: int
    tau: float | None
    tau_anchored: bool
    published_speedup: float | None
    predicted_speedup: float | None
    ratio: float | None
    published_baseline: float | None
    predicted_baseline: float
    baseline_ratio: float | None
    params: str
    beyond_full_acceptance: bool = Field(default=False, description="the published "
                                         "speedup exceeds the model's at full acceptance")


class SweepCheck(Strict):
    sweep: str
    kind: Literal["concurrency", "depth"]
    x: list[int] = Field(description="concurrencies or depths, ascending")
    published: list[float]
    predicted: list[float]
    published_direction: str
    predicted_direction: str
    published_best: int | None = Field(default=None, description="depth sweeps: best depth")
    predicted_best: int | None = None
    ok: bool
    against: list[str] = Field(default_factory=list, description="steps between neighbouring "
                               "points where the published speedup moves by more than "
                               "`FLAT` and the prediction moves the other way: a wrong shape "
                               "that the first-to-last direction (`ok`) does not see")


class GroupSummary(Strict):
    family: str
    engine: str
    drafter: str
    points: int
    known_tau: int
    within_band: int
    median_abs_error_pct: float | None
    baseline_points: int
    baseline_median_abs_error_pct: float | None


class Evaluation(Strict):
    mode: Mode
    rows: list[Row]
    sweeps: list[SweepCheck]
    groups: list[GroupSummary]
    points: int
    sources: int
    known_tau: int
    within_band: int
    median_abs_error_pct: float
    worst_ratio: float
    worst_id: str
    baseline_points: int
    baseline_median_abs_error_pct: float
    baseline_worst_ratio: float
    beyond_full_acceptance: int = Field(default=0, description="published speedups the "
                                        "model cannot reach even at full acceptance")
    baseline_measurements: int = Field(default=0, description="distinct published baseline "
                                       "measurements: a speculative point that repeats its "
                                       "source's baseline run counts it once")
    baseline_measurements_median_abs_error_pct: float = Field(
        default=0.0, description="median |error| over the distinct baseline measurements")
    tau_sources: int = Field(default=0, description="sources with a published τ")
    source_mean_within: float = Field(default=0.0, description="mean over the sources with "
                                      "a published τ of their share within the band: every "
                                      "source weighs the same")
    largest_tau_source: str = Field(default="", description="the source with the most "
                                    "points with a published τ")
    largest_tau_source_points: int = 0
    refused: list[RefusedPoint] = Field(default_factory=list, description="points whose "
                                        "deployment (stepmodel.deployment_refusal) or "
                                        "measurement (FINITE_RUN) the step model refuses "
                                        "by name: not predicted")
    fits: list[Fitted]

    @property
    def share_within(self) -> float:
        return self.within_band / self.known_tau if self.known_tau else 0.0

    @property
    def sweeps_ok(self) -> bool:
        return all(s.ok for s in self.sweeps)

    @property
    def passes(self) -> bool:
        """Issue 28's Done-when: ≥80% of the points with a published τ within the band,
        every sweep in its direction (and best depth), and the baseline median |error| ≤
        12% counting each published baseline measurement once (the row count repeats a
        table's one baseline run as many times as the table has rows)."""
        return (self.share_within >= 0.8 and self.sweeps_ok
                and self.baseline_measurements_median_abs_error_pct <= 12.0)


def _direction(first: float, last: float, band: float = FLAT) -> str:
    change = last / first - 1
    return "flat" if abs(change) <= band else ("rising" if change > 0 else "falling")


def _sweeps(points: Sequence[Point], rows: Sequence[Row]) -> list[SweepCheck]:
    by_id = {r.id: r for r in rows}
    out = []
    for name in sorted({p.sweep for p in points if p.sweep}):
        members = [p for p in points if p.sweep == name and by_id[p.id].ratio is not None]
        if len(members) < 2:
            continue
        if any(p.sweep_kind == "config" for p in members):
            continue  # other draft settings: no direction to match
        kind: Literal["concurrency", "depth"] = \
            "depth" if len({p.concurrency for p in members}) == 1 else "concurrency"
        members.sort(key=lambda p: p.depth if kind == "depth" else p.concurrency)
        pub = [by_id[p.id].published_speedup or 0.0 for p in members]
        pre = [by_id[p.id].predicted_speedup or 0.0 for p in members]
        xs = [p.depth if kind == "depth" else p.concurrency for p in members]
        pub_dir = _direction(pub[0], pub[-1])
        pre_dir = _direction(pre[0], pre[-1], band=0.0)
        ok = pub_dir == "flat" or pre_dir == pub_dir
        best_pub = best_pre = None
        if kind == "depth":
            best_pub = xs[pub.index(max(pub))]
            best_pre = xs[pre.index(max(pre))]
            ok = ok and abs(xs.index(best_pub) - xs.index(best_pre)) <= 1
        out.append(SweepCheck(
            sweep=name, kind=kind, x=xs, published=[round(x, 3) for x in pub],
            predicted=[round(x, 3) for x in pre], published_direction=pub_dir,
            predicted_direction=pre_dir, published_best=best_pub, predicted_best=best_pre,
            ok=ok, against=steps_against(xs, pub, pre)))
    return out


def steps_against(xs: Sequence[int], published: Sequence[float],
                  predicted: Sequence[float]) -> list[str]:
    """Each step x[i] → x[i+1] where the published speedup rises or falls by more than
    `FLAT` and the predicted one moves the other way (by any amount, as the verdict's
    predicted direction is its sign), as "16→32: published 1.530→1.440, predicted
    1.826→1.905". The verdict (`SweepCheck.ok`) compares a sweep's ends, as the
    latency-dial issue asks; these say where a prediction that gets the ends right bends
    the wrong way in between."""
    out = []
    for i in range(len(xs) - 1):
        pub = _direction(published[i], published[i + 1])
        pre = _direction(predicted[i], predicted[i + 1], band=0.0)
        if pub != "flat" and pre != "flat" and pub != pre:
            out.append(f"{xs[i]}→{xs[i + 1]}: published {published[i]:.3f}→"
                       f"{published[i + 1]:.3f}, predicted {predicted[i]:.3f}→"
                       f"{predicted[i + 1]:.3f}")
    return out


def median(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _inside(r: Row) -> bool:
    return r.ratio is not None and BAND[0] <= r.ratio <= BAND[1]


def _groups(rows: Sequence[Row]) -> list[GroupSummary]:
    keys = sorted({(r.family, r.engine.split()[0], r.drafter) for r in rows})
    out = []
    for fam, eng, dr in keys:
        mine = [r for r in rows if (r.family, r.engine.split()[0], r.drafter) == (fam, eng, dr)]
        known = [r for r in mine if r.ratio is not None and not r.tau_anchored]
        base = [r for r in mine if r.baseline_ratio is not None]
        out.append(GroupSummary(
            family=fam, engine=eng, drafter=dr, points=len(mine), known_tau=len(known),
            within_band=sum(1 for r in known if _inside(r)),
            median_abs_error_pct=round(100 * median([abs((r.ratio or 1) - 1)
                                                     for r in known]), 1) if known else None,
            baseline_points=len(base),
            baseline_median_abs_error_pct=round(100 * median(
                [abs((r.baseline_ratio or 1) - 1) for r in base]), 1) if base else None))
    return out


def _baseline_measurements(rows: Sequence[Row]) -> list[float]:
    """Baseline ratios, each published baseline measurement once: the speculative points
    of a table that all compare with one baseline run repeat that run's number (and hence
    its ratio), which would otherwise weigh as many times as the table has rows."""
    seen: dict[tuple[object, ...], float] = {}
    for r in rows:
        if r.baseline_ratio is not None:
            # the published number names the run (a TPOT-only point: its ratio, to 3 places)
            run = r.published_baseline if r.published_baseline is not None \
                else round(r.baseline_ratio, 3)
            key = (r.source, r.gpu, r.engine, r.target, r.concurrency, run)
            seen.setdefault(key, r.baseline_ratio)
    return list(seen.values())


def summary(mode: Mode, points: Sequence[Point], rows: list[Row],
            fits: list[Fitted]) -> Evaluation:
    refused = [RefusedPoint(id=p.id, source=p.source_key, name=why.name, reason=why.reason)
               for p in points if (why := p.refusal) is not None]
    points = [p for p in points if p.refusal is None]
    known = [r for r in rows if r.ratio is not None and not r.tau_anchored]
    by_source: dict[str, list[Row]] = {}
    for r in known:
        by_source.setdefault(r.source, []).append(r)
    largest = max(sorted(by_source), key=lambda k: len(by_source[k]), default="")
    distinct = _baseline_measurements(rows)
    errors = [abs((r.ratio or 1) - 1) for r in known]
    worst = max(known, key=lambda r: abs(math.log(r.ratio or 1.0)), default=None)
    base = [r for r in rows if r.baseline_ratio]
    base_worst = max((r.baseline_ratio or 1.0 for r in base),
                     key=lambda x: abs(math.log(x)), default=1.0)
    return Evaluation(
        mode=mode, rows=rows, sweeps=_sweeps(points, rows), groups=_groups(rows),
        points=len(rows), sources=len({r.source for r in rows}), known_tau=len(known),
        within_band=sum(1 for r in known if _inside(r)),
        median_abs_error_pct=round(100 * median(errors), 1),
        worst_ratio=round(worst.ratio or 1.0, 3) if worst else 1.0,
        worst_id=worst.id if worst else "–", baseline_points=len(base),
        baseline_median_abs_error_pct=round(100 * median(
            [abs((r.baseline_ratio or 1) - 1) for r in base]), 1),
        baseline_worst_ratio=round(base_worst, 3),
        beyond_full_acceptance=sum(1 for r in rows if r.beyond_full_acceptance),
        baseline_measurements=len(distinct),
        baseline_measurements_median_abs_error_pct=round(100 * median(
            [abs(x - 1) for x in distinct]), 1),
        tau_sources=len(by_source),
        source_mean_within=round(sum(sum(1 for r in v if _inside(r)) / len(v)
                                     for v in by_source.values()) / len(by_source), 4)
        if by_source else 0.0,
        largest_tau_source=largest,
        largest_tau_source_points=len(by_source.get(largest, [])), refused=refused,
        fits=fits)
