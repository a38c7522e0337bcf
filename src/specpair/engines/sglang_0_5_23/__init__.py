"""SGLang 0.5.23: facts, server arguments, launch, budget and metrics of this one
release."""

from __future__ import annotations

from specpair.engines.release import EngineRelease
from specpair.engines.sglang_0_5_23 import (
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
    image="lmsysorg/sglang:v0.5.23",
    draft_mode=draft_mode.geometry,
    kv_probe=probe.kv_probe,
)
