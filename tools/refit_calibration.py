"""Refit the latency model on the published points and store the fits in this repository.

    python tools/refit_calibration.py                        # refit, cross-validate, store
    python benchmarks/latency_validation.py --refit --write  # the same, with the report

Stores the `fitted:` and `cross_validated:` blocks of src/specpair/data/calibration.yaml
(everything above `fitted:`, the reviewed points and the written bound reasons, is kept
as it is) and the leave-one-source-out evaluation, src/specpair/data/cross_validation.json.
The package only reads its data files; this tool writes the repository's copies, at paths
named here (`--data` another folder), never into an installed package. Review the diff and
commit it with the points that moved it: tests/test_calibration.py fails while the stored
fits are not what the points give.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from specpair.analyse import calibration_data, cross_validation, step_fits
from specpair.analyse.calibration_data import ErrorBand, Fitted
from specpair.analyse.evaluation import Evaluation
from specpair.facts.calibration_files import CROSS_VALIDATION_FILE
from specpair.write.writer import atomic_write

DATA = Path(__file__).resolve().parents[1] / "src" / "specpair" / "data"
"""The repository's data folder, the one the package is built from."""


def fits_yaml(fits: list[Fitted], bands: list[ErrorBand]) -> str:
    """The `fitted:` and `cross_validated:` blocks of data/calibration.yaml, as this tool
    stores them."""
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


def write_fits(fits: list[Fitted], bands: list[ErrorBand], cv: Evaluation,
               data: Path = DATA) -> None:
    """Store the fits, their error bands and the cross-validated evaluation in `data`
    (the repository's src/specpair/data), and forget what this process had loaded."""
    path = data / "calibration.yaml"
    text = path.read_text(encoding="utf-8")
    atomic_write(path, (text[:text.index("\nfitted:") + 1] + fits_yaml(fits, bands)).encode())
    atomic_write(data / Path(CROSS_VALIDATION_FILE).name,
                 cross_validation.cross_validation_json(cv).encode())
    calibration_data.load.cache_clear()
    cross_validation.stored_loso_fits.cache_clear()
    cross_validation.stored_cross_validation.cache_clear()


def refit_and_write(data: Path = DATA) -> Evaluation:
    """Refit every GPU family × engine, cross-validate the refit, store both; returns the
    cross-validated evaluation."""
    points = calibration_data.load()
    points = points.model_copy(update={"fitted": step_fits.refit(points)})
    cv = cross_validation.cross_validate(points)
    write_fits(points.fitted, cross_validation.error_bands(cv), cv, data)
    return cv


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the data folder to write "
                        "(default: this repository's src/specpair/data)")
    args = parser.parse_args()
    cv = refit_and_write(args.data)
    print(f"stored in {args.data}: fits and error bands (calibration.yaml), the "
          f"cross-validated evaluation ({Path(CROSS_VALIDATION_FILE).name}): "
          f"{cv.points} points, Done when {'holds' if cv.passes else 'DOES NOT HOLD'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
