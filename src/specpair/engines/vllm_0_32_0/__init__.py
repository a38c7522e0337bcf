"""vLLM 0.32.0: vLLM 0.33.0's package (`vllm_0_33_0`) but for the reviewed differences in
`facts.DIFFERENCES`, each overridden in the module it touches (budget: the GDN block
size; launch: the float KV dtype rule). Its server arguments, metrics, log lines and bench
probe are 0.33.0's: the code they read is the same in both wheels. Its draft-mode MTP
layer counts are its own engine_lists.yaml's, read from its hf_config_override."""

from __future__ import annotations

import functools

from specpair.engines.draft_mode import engine_rewrites
from specpair.engines.release import EngineRelease
from specpair.engines.vllm_0_32_0 import args, budget, facts, launch, metrics, schedule
from specpair.engines.vllm_0_33_0 import bench, logs, probe

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
    image="vllm/vllm-openai:v0.32.0",
    draft_mode=engine_rewrites(facts.PROFILE.label),
    differences=facts.DIFFERENCES,
    compared_with=facts.COMPARED_WITH,
    kv_probe=functools.partial(probe.kv_probe, rules=budget.RULES, args=args,
                               build=launch.build),
)
