"""The canary before traffic (runbook section `canary`): how many pinned requests it sends,
how long it may take, and what the deployment does when it fails. `specpair canary` runs
it by hand; `stage-and-launch.sh` and the Kubernetes manifest run it before the server
takes traffic (generated/canary.py with generated/canary.json)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from specpair.model.common import Strict


class Canary(Strict):
    on_failure: Literal["fail", "fallback"] = Field(
        default="fallback", description="fallback (default): the generated baseline launch "
        "(the target alone, lossless) takes over and serves, labelled as a fallback, so "
        "capacity stays while the alert names the reason; fail: the server never becomes "
        "ready (with the Recreate rollout no replica of the pair serves until it is fixed)")
    requests_per_class: Annotated[int, Field(ge=1, le=16)] = Field(
        default=4, description="pinned requests per class, at least: the first of each "
        "synthetic workload (or of each class of the captured traffic with `specpair canary "
        "--record`); as many as the deployment's concurrency where that is more, so the "
        "server runs at it (at most 256 requests in all)")
    max_tokens: Annotated[int, Field(ge=8, le=1024)] = Field(
        default=64, description="tokens each canary request generates at most (temperature "
        "0); the workload's own max_tokens where smaller")
    metrics_port: Annotated[int, Field(ge=1, le=65535)] = Field(
        default=9471, description="where the deployment serves the canary's verdict for "
        "Prometheus (specpair_canary_state, specpair_canary_reason): which launch serves "
        "and why; the PodMonitor scrapes it, the canary alerts read it")
    timeout_s: Annotated[float, Field(ge=10, le=3600)] = Field(
        default=300.0, description="the whole canary's deadline; past it the canary fails")


__all__ = ["Canary"]
