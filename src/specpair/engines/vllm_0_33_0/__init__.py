"""vLLM 0.33.0: facts, server arguments, launch, budget and metrics of this one
release."""

from __future__ import annotations

from specpair.engines.release import EngineRelease
from specpair.engines.vllm_0_33_0 import args, budget, facts, launch, metrics

RELEASE = EngineRelease(
    profile=facts.PROFILE,
    server_args=args.server_args,
    launch=launch.build,
    budget=budget.budget,
    metrics=metrics.METRICS,
    image="vllm/vllm-openai:v0.33.0",
)
