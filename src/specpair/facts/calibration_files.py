"""The latency model's reviewed data files, read from the package as text.

`data/calibration.yaml` (reviewed points, the stored fits and error bands, the reasons
for a fitted parameter on a bound), `data/published_points.yaml`,
`data/held_out_points.yaml` and `data/cross_validation.json`. Their schema and their
checks need the step model, so the typed loading is `specpair.analyse.calibration_data`'s;
the package only ever reads them (`tools/refit_calibration.py` writes the repository's
copies).
"""

from __future__ import annotations

from importlib import resources

HELD_OUT_FILE = "held_out_points.yaml"
"""Published points collected after the stored fits and kept out of them
(`calibration_data.load` does not read it): scored with the stored fits, they are
measurements the fits have never seen, where leave-one-source-out still shares every
other source's GPU families and models."""

CROSS_VALIDATION_FILE = "data/cross_validation.json"
"""The stored leave-one-source-out evaluation, written with the fits and bands by
`tools/refit_calibration.py`. Recomputing it means refitting once per source (about a
minute on two cores); every `specpair site` shows it, so it is stored as reviewed data
like the fits, and tests/test_calibration.py recomputes it and fails if it is stale."""


def package_text(name: str) -> str | None:
    """The text of `data/<name>` in the installed package, or None without one."""
    res = resources.files("specpair").joinpath(f"data/{name}")
    return res.read_text("utf-8") if res.is_file() else None
