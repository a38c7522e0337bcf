"""vLLM 0.32.0: facts, launch, budget and metrics of this one release (copied from
vllm_0_33_0 and changed where facts.DIFFERENCES says the releases differ)."""

from __future__ import annotations

from specpair.engines.release import EngineRelease
from specpair.engines.vllm_0_32_0 import budget, facts, launch, metrics

RELEASE = EngineRelease(
    profile=facts.PROFILE,
    launch=launch.build,
    budget=budget.budget,
    metrics=metrics.METRICS,
    image="vllm/vllm-openai:v0.32.0",
)
