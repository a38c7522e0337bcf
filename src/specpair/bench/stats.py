"""Summary statistics of a run: nearest-rank percentiles (a leaf module: the record and the
per-class statistics both use it)."""

from __future__ import annotations

import math

from pydantic import Field

from specpair.model.common import Strict


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0-100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


class Stats(Strict):
    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None
    sem: float | None = Field(
        default=None, description="standard error of the mean (sample standard deviation "
        "/ √n); None for fewer than two values and in records made before it was recorded")

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        mean = sum(values) / len(values) if values else None
        sem = None
        if mean is not None and len(values) > 1:
            var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
            sem = math.sqrt(var / len(values))
        return cls(p50=percentile(values, 50), p90=percentile(values, 90),
                   p99=percentile(values, 99), mean=mean, sem=sem)
