"""A user's own file of published points (`benchmarks/latency_validation.py --points`),
read as text; `specpair.analyse.calibration_data.load_points` validates it."""

from __future__ import annotations

from pathlib import Path


def points_text(path: Path) -> str:
    """The file's text (an `OSError` where it cannot be read, as the caller reports it)."""
    return path.read_text(encoding="utf-8")
