"""What a K = 0 range of a speculation schedule costs against the target alone, per engine.

`data/k0_cost.yaml` holds the published paired measurements (the same server with and
without a speculative config whose schedule never drafts); this module loads them, checks
each printed percentage against its two printed TPOTs, and gives the cost as the interval
the published cells span: a fraction of the target-alone TPOT, not a point guess. An
engine without a published measurement has no cost here (`cost` is None): its schedules
say the K = 0 cost is unmodelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from pydantic import Field, PositiveFloat, model_validator

from specpair.facts import yaml_data
from specpair.facts.calibration_files import package_text
from specpair.model.common import PositiveInt, Strict

K0_COST_FILE = "k0_cost.yaml"
ROUNDING_PCT = 0.011
"""How far a printed tax may sit from its two printed TPOTs: the percentages are printed to
two decimals (half a unit of the last digit, and the TPOTs' own rounding)."""


class K0Point(Strict):
    """One published cell: the same workload with and without the speculative config."""

    context: PositiveInt = Field(description="prompt tokens per request")
    concurrency: PositiveInt = Field(description="running requests")
    no_spec_tpot_ms: PositiveFloat = Field(description="TPOT without a speculative config")
    k0_tpot_ms: PositiveFloat = Field(description="TPOT with a schedule that never drafts")
    tax_pct: float = Field(description="the published increase of TPOT, in percent")

    @model_validator(mode="after")
    def _printed_consistently(self) -> K0Point:
        implied = (self.k0_tpot_ms / self.no_spec_tpot_ms - 1) * 100
        if abs(implied - self.tax_pct) > ROUNDING_PCT:
            raise ValueError(f"tax_pct {self.tax_pct} does not match the TPOTs "
                             f"{self.k0_tpot_ms} / {self.no_spec_tpot_ms} ({implied:.3f} %)")
        return self


class K0Measurement(Strict):
    """One engine's published K = 0 measurement (the file's keys are documented there)."""

    release: str
    runner: str
    runner_name: str
    gpu: str
    target: str
    draft: str
    workload: str
    points: list[K0Point] = Field(min_length=1)
    source: str
    url: str
    also: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class K0Cost:
    """The published K = 0 cost of one engine: TPOT × (1 + a fraction in [low, high])."""

    engine: str
    low: float
    high: float
    release: str
    runner: str
    gpu: str
    concurrencies: tuple[int, int]
    url: str

    def slowdown(self, end: Literal["low", "high"]) -> float:
        """The factor a K = 0 step's TPOT is of the target alone's, at the interval's
        `end` ("low" or "high")."""
        return 1 + (self.low if end == "low" else self.high)

    @property
    def label(self) -> str:
        lo, hi = self.concurrencies
        return (f"K = 0 cost: +{self.low:.1%}–{self.high:.1%} TPOT against the target alone "
                f"(published for {self.engine} {self.release}'s {self.runner} on {self.gpu}, "
                f"{lo}–{hi} running requests: {self.url})")


@cache
def measurements() -> dict[str, K0Measurement]:
    """Engine name → its published measurement, as reviewed in `data/k0_cost.yaml`."""
    raw = yaml_data.safe_load(package_text(K0_COST_FILE) or "") or {}
    return {engine: K0Measurement.model_validate(entry) for engine, entry in raw.items()}


def cost(engine: str) -> K0Cost | None:
    """The K = 0 cost of `engine` (the interval its published cells span), or None where no
    measurement is published for it."""
    m = measurements().get(engine)
    if m is None:
        return None
    taxes = [p.tax_pct / 100 for p in m.points]
    crowd = [p.concurrency for p in m.points]
    return K0Cost(engine=engine, low=min(taxes), high=max(taxes), release=m.release,
                  runner=m.runner_name, gpu=m.gpu, concurrencies=(min(crowd), max(crowd)),
                  url=m.url)


def label(engine: str, release: str) -> str:
    """What an output says of the K = 0 ranges of a schedule on `engine` `release`: the
    published cost, said unverified where it was measured on another release (the
    release's runner may not pay it), or unmodelled."""
    known = cost(engine)
    if known is None:
        return f"K = 0 cost: unmodelled (no published measurement for {engine})"
    if known.release == release:
        return known.label
    return (f"{known.label}; unverified for {engine} {release}, which nobody has measured: "
            "a measurement of it replaces this")
