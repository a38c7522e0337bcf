"""vLLM 0.34.0: vLLM 0.33.0's package (`vllm_0_33_0`) but for the reviewed differences in
`facts.DIFFERENCES`, each overridden in the module it touches: args (block size 64, the KV
sizing mode, the DFlash/DSpark running-sequence cap), launch (pinned KV bytes, the
speculative-config keys, no heterogeneous mode, the declared speculator), budget (the two
sizing modes), schedule (no V1 guard), logs (the graph-capture line's file). Its bench
probe is 0.33.0's: the code it reads is the same in both wheels (K per method). Its
draft-mode MTP layer counts are its own engine_lists.yaml's, read from its
hf_config_override."""

from __future__ import annotations

import functools

from specpair.engines.draft_mode import engine_rewrites
from specpair.engines.release import EngineRelease
from specpair.engines.vllm_0_33_0 import bench, probe
from specpair.engines.vllm_0_34_0 import args, budget, facts, launch, logs, metrics, schedule

RELEASE = EngineRelease(
    profile=facts.PROFILE,
    server_args=args.server_args,
    launch=launch.build,
    budget=budget.budget,
    recap=budget.recap,
    reschedule=budget.reschedule,
    metrics=metrics.METRICS,
    log_timings=logs.TIMINGS,
    log_kv_capacity=logs.KV_CAPACITY,
    bench=bench.PROBE,
    schedule_refusal=schedule.refusal,
    image="vllm/vllm-openai:v0.34.0",
    draft_mode=engine_rewrites(facts.PROFILE.label),
    differences=facts.DIFFERENCES,
    compared_with=facts.COMPARED_WITH,
    kv_probe=functools.partial(probe.kv_probe, rules=budget.RULES, args=args,
                               build=launch.build),
)
