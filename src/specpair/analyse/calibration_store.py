"""Storing a refit in the package's data: the `fitted:` and `cross_validated:` blocks of
data/calibration.yaml and the cross-validated evaluation (`latency_validation.py --refit
--write`)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from specpair.analyse.calibration_data import ErrorBand, Fitted, load
from specpair.analyse.cross_validation import (
    cross_validation_json,
    stored_cross_validation,
    stored_loso_fits,
)
from specpair.analyse.evaluation import Evaluation
from specpair.facts.calibration_files import CROSS_VALIDATION_FILE


def fits_yaml(fits: list[Fitted], bands: list[ErrorBand]) -> str:
    """The `fitted:` and `cross_validated:` blocks of data/calibration.yaml, as
    `latency_validation.py --refit --write` stores them."""
    lines = ["fitted:"]
    for f in fits:
        lines.append(f"  - family: {f.family}")
        lines.append(f"    engine: {f.engine}")
        lines.append("    params: {" + ", ".join(
            f"{k}: {v:.4g}" for k, v in f.params.model_dump().items()) + "}")
        lines.append("    draft_s: {" + ", ".join(f"{k}: {v:.4g}"
                                                  for k, v in sorted(f.draft_s.items())) + "}")
        lines.append("    free: [" + ", ".join(f.free) + "]")
        lines.append("    at_bound: {" + ", ".join(f"{k}: {v}" for k, v in
                                                   sorted(f.at_bound.items())) + "}")
        lines.append("    fitted_on: [" + ", ".join(f.fitted_on) + "]")
        if f.pooled_from:
            lines.append("    pooled_from: [" + ", ".join(f.pooled_from) + "]")
    lines.append("cross_validated:")
    for b in bands:
        lines.append(f"  - {{family: {b.family}, engine: {b.engine}, drafter: {b.drafter}, "
                     f"quantity: {b.quantity}, n: {b.n}, ratio_lo: {b.ratio_lo:g}, "
                     f"ratio_hi: {b.ratio_hi:g}, median_abs_error_pct: "
                     f"{b.median_abs_error_pct:g}}}")
    return "\n".join(lines) + "\n"


def write_fits(fits: list[Fitted], bands: list[ErrorBand], cv: Evaluation) -> None:
    path = Path(str(resources.files("specpair").joinpath("data/calibration.yaml")))
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:text.index("\nfitted:") + 1] + fits_yaml(fits, bands),
                    encoding="utf-8")
    Path(str(resources.files("specpair").joinpath(CROSS_VALIDATION_FILE))).write_text(
        cross_validation_json(cv), encoding="utf-8")
    load.cache_clear()
    stored_loso_fits.cache_clear()
    stored_cross_validation.cache_clear()
