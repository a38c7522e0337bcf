"""How a pair's replicas follow demand (runbook section `deployment.autoscaling`).

The generated KEDA ScaledObject (`autoscaling.k8s.yaml`) scales the pair's Deployment or
LeaderWorkerSet on the served token rate over the replica's token capacity at the live
acceptance length (`specpair.analyse.capacity`); these fields are the platform's choices
in it: how many replicas it may run, how full it lets each one get, and which end of the
capacity's interval it trusts.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from specpair.model.common import PositiveInt, Strict


class Autoscaling(Strict):
    min_replicas: PositiveInt = Field(
        default=1, description="fewest replicas, whatever the demand (at least 1: a pair "
        "at zero would meet its first request with a cold start)")
    max_replicas: PositiveInt = Field(
        default=2, description="most replicas the autoscaler may run: the GPU budget a "
        "platform grants the pair (default 2: one replica more when demand or a drop in "
        "acceptance outgrows one)")
    target_utilization: Annotated[float, Field(gt=0, le=1)] = Field(
        default=0.8, description="share of a replica's token capacity the autoscaler fills "
        "before adding one: the headroom covers demand that grows while a new replica "
        "starts (its cold start)")
    capacity_bound: Literal["lower", "model", "upper"] = Field(
        default="lower", description="which end of the capacity's interval replicas are "
        "counted against: lower (default) holds where the step model overestimates the "
        "replica as far as its cross-validated 10th percentile; `specpair calibrate` on "
        "the pair's own bench record narrows the interval")

    @model_validator(mode="after")
    def _ordered(self) -> Autoscaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas {self.max_replicas} is below min_replicas "
                             f"{self.min_replicas}")
        return self


__all__ = ["Autoscaling"]
