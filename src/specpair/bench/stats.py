"""Summary statistics of a run: nearest-rank percentiles (a leaf module: the record and the
per-class statistics both use it)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field, field_validator

from specpair.model.common import MAX_COUNT, Strict


def _figures(value: Any) -> Iterator[int | float]:
    if isinstance(value, bool | BaseModel):
        return  # a nested model checks its own fields
    if isinstance(value, int | float):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _figures(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _figures(item)


class Recorded(Strict):
    """A part of a measurement record. Records are committed like runbooks and feed the
    card, break-even and the alert thresholds, so every figure in them is physical: no
    negative count, time, rate or τ, nothing past MAX_COUNT (τ 1e308 and counts of 10**400
    reached the card or ended in tracebacks). NaN and infinity are refused by Strict."""

    @field_validator("*", mode="after")
    @classmethod
    def _physical(cls, value: Any) -> Any:
        for figure in _figures(value):
            if figure < 0:
                raise ValueError(f"{figure} is negative: a record's counts, times, rates "
                                 "and τ are not")
            if figure > MAX_COUNT:
                shown = f"{figure:.3g}" if isinstance(figure, float) else \
                    f"a number of {len(str(figure))} digits"
                raise ValueError(f"{shown} is past any measurement (limit {MAX_COUNT})")
        return value


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0-100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


class Stats(Recorded):
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
