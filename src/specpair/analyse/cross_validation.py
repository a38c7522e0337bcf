"""Leave-one-source-out cross-validation: every point predicted with parameters fitted
without any point of its source, the stored evaluation (`data/cross_validation.json`),
and the error bands per GPU family × engine × drafter family it gives."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cache

from specpair.analyse.calibration_data import CalibrationData, ErrorBand, Fitted, load
from specpair.analyse.evaluation import Evaluation, Mode, median, summary
from specpair.analyse.evaluation_rows import predict_rows
from specpair.analyse.published_points import CalibrationError, Point
from specpair.analyse.step_fits import refit
from specpair.facts.calibration_files import CROSS_VALIDATION_FILE, package_text


def evaluate(data: CalibrationData | None = None, fits: list[Fitted] | None = None,
             mode: Mode = "as stored") -> Evaluation:
    """Every point predicted: with the stored (or given) fits, or cross-validated."""
    data = data or load()
    if mode == "cross-validated":
        return cross_validate(data)
    fits = data.fitted if fits is None else fits
    # with the stored fits, δ too is the package's (a user's file is evaluated, not fitted)
    rows = predict_rows(data.points, data, None, fits,
                        load().points if mode == "as stored" else data.points)
    return summary(mode, data.points, rows, fits)


def cross_validate(data: CalibrationData | None = None) -> Evaluation:
    """Leave-one-source-out: every point predicted with parameters fitted without any
    point of its source (a sweep's τ anchor too comes from those parameters)."""
    data = data or load()
    return _cross_validate(data)


def loso_fits(data: CalibrationData) -> dict[str, list[Fitted]]:
    """Source → the fits made without any of its points (a group the source has no point
    in keeps the full fit)."""
    full = refit(data)
    return {s: refit(data, exclude_source=s, reuse=full)
            for s in sorted({p.source_key for p in data.points})}


def _cross_validate(data: CalibrationData,
                    fits_for: Mapping[str, Sequence[Fitted]] | None = None) -> Evaluation:
    fits_for = loso_fits(data) if fits_for is None else fits_for
    rows = predict_rows(data.points, data, fits_for, data.fitted)
    return summary("cross-validated", data.points, rows, data.fitted)


@cache
def stored_loso_fits() -> dict[str, list[Fitted]]:
    """`loso_fits` of the package's data (computed once a process)."""
    return loso_fits(load())


def fresh_cross_validation() -> Evaluation:
    """The cross-validated evaluation recomputed from the package's points."""
    return _cross_validate(load(), stored_loso_fits())


@cache
def stored_cross_validation() -> Evaluation:
    """The cross-validated evaluation of the package's data, as stored."""
    text = package_text(CROSS_VALIDATION_FILE.removeprefix("data/"))
    if text is None:
        raise CalibrationError(f"{CROSS_VALIDATION_FILE} is missing from the package: run "
                               "`python tools/refit_calibration.py`")
    return Evaluation.model_validate_json(text)


def cross_validation_json(ev: Evaluation) -> str:
    return ev.model_dump_json(indent=1) + "\n"


def _quantile(values: Sequence[float], q: float) -> float:
    v = sorted(values)
    if len(v) == 1:
        return v[0]
    pos = q * (len(v) - 1)
    i = math.floor(pos)
    j = min(i + 1, len(v) - 1)
    return v[i] + (v[j] - v[i]) * (pos - i)


def error_bands(ev: Evaluation) -> list[ErrorBand]:
    """The 10th-90th percentile of the cross-validated ratios, per GPU family × engine ×
    drafter family (speedups with a published τ; baseline throughputs under "none")."""
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for r in ev.rows:
        eng = r.engine.split()[0]
        if r.ratio is not None and not r.tau_anchored:
            groups.setdefault((r.family, eng, r.drafter, "speedup"), []).append(r.ratio)
        if r.baseline_ratio is not None:
            groups.setdefault((r.family, eng, "none", "throughput"), []).append(
                r.baseline_ratio)
    out = []
    for (fam, eng, dr, qty), ratios in sorted(groups.items()):
        logs = [math.log(x) for x in ratios]
        out.append(ErrorBand(family=fam, engine=eng, drafter=dr,
                             quantity=qty,
                             n=len(ratios), ratio_lo=round(math.exp(_quantile(logs, 0.1)), 4),
                             ratio_hi=round(math.exp(_quantile(logs, 0.9)), 4),
                             median_abs_error_pct=round(100 * median(
                                 [abs(x - 1) for x in ratios]), 1)))
    return out


def sources(points: Iterable[Point]) -> list[str]:
    return sorted({p.source_key for p in points})
