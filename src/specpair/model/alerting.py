"""How quickly a pair's alerts react (runbook section `alerts`): a platform's trade-off
between paging on a short dip and paging late, so the runbook chooses it; the pair page
and the rule file state the detection delay that follows."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from specpair.model.common import Strict

# a Prometheus duration in whole minutes or hours, as the rules and `for:` take it
Duration = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{0,3}[mh]$")]


def seconds(duration: str) -> int:
    return int(duration[:-1]) * (60 if duration.endswith("m") else 3600)


class AlertWindows(Strict):
    slo_window: Duration = Field(default="5m", description="τ window whose percentile the "
                                 "SLO alert watches")
    slo_lookback: Duration = Field(default="1h", description="how far back that percentile "
                                   "looks (longer: fewer pages, later recovery)")
    slo_for: Duration = Field(default="10m", description="how long the SLO condition must "
                              "hold before the alert fires")
    break_even_window: Duration = Field(default="30m", description="τ window compared with "
                                        "break-even τ*")
    break_even_for: Duration = Field(default="15m", description="how long the windowed τ "
                                     "must stay below τ* before the alert fires")


__all__ = ["AlertWindows", "Duration", "seconds"]
