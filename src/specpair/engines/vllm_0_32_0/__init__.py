"""vLLM 0.32.0: vLLM 0.33.0's package (`vllm_0_33_0`) but for the reviewed differences in
`facts.DIFFERENCES`, each overridden in the module it touches (budget: the GDN block
size; launch: the float KV dtype rule). Its server arguments, metrics, log lines and bench
probe and its draft-mode MTP layer counts are 0.33.0's: the code they read is the same in
both wheels (models/qwen3_next_mtp.py:63, models/qwen3_5_mtp.py:82 in 0.32.0)."""

from __future__ import annotations

from specpair.engines.release import EngineRelease
from specpair.engines.vllm_0_32_0 import args, budget, facts, launch, metrics, schedule
from specpair.engines.vllm_0_33_0 import bench, draft_mode, logs

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
    draft_mode=draft_mode.geometry,
    differences=facts.DIFFERENCES,
    compared_with=facts.COMPARED_WITH,
)
