"""vLLM 0.33.0: facts, server arguments, launch, budget and metrics of this one
release."""

from __future__ import annotations

import functools

from specpair.engines.release import EngineRelease
from specpair.engines.vllm_0_33_0 import (
    args,
    bench,
    budget,
    draft_mode,
    facts,
    launch,
    logs,
    metrics,
    probe,
    schedule,
)

RELEASE = EngineRelease(
    profile=facts.PROFILE,
    server_args=args.server_args,
    launch=launch.build,
    budget=budget.budget,
    recap=budget.recap,
    reschedule=budget.reschedule,
    metrics=metrics.METRICS,
    log_timings=logs.TIMINGS,
    bench=bench.PROBE,
    schedule_refusal=schedule.refusal,
    image="vllm/vllm-openai:v0.33.0",
    draft_mode=draft_mode.geometry,
    kv_probe=functools.partial(probe.kv_probe, rules=budget.RULES, args=args,
                               build=launch.build),
)
