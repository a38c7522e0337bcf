"""SGLang 0.5.23: facts, launch, budget and metrics of this one release."""

from __future__ import annotations

from specpair.engines.release import EngineRelease
from specpair.engines.sglang_0_5_23 import budget, facts, launch, metrics

RELEASE = EngineRelease(
    profile=facts.PROFILE,
    launch=launch.build,
    budget=budget.budget,
    metrics=metrics.METRICS,
    image="lmsysorg/sglang:v0.5.23",
)
