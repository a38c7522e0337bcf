"""SGLang 0.5.18: the 0.5.23 package's code with this release's facts (facts.DIFFERENCES):
its defaults, its rule sources, the start-up refusals only it has, its metrics' source."""

from __future__ import annotations

import functools

from specpair.engines.release import EngineRelease
from specpair.engines.sglang_0_5_18 import args, budget, draft_mode, facts, launch, metrics
from specpair.engines.sglang_0_5_23 import bench, logs, probe, schedule

RELEASE = EngineRelease(
    profile=facts.PROFILE,
    server_args=args.server_args,
    launch=launch.build,
    budget=budget.budget,
    recap=budget.recap,
    reschedule=budget.reschedule,
    metrics=metrics.METRICS,
    # the same log lines (model_runner.py:1156, cuda_graph_setup.py:394) and request
    # fields (return_spec_tokens_details, /server_info) as 0.5.23
    log_timings=logs.TIMINGS,
    bench=bench.PROBE,
    image="lmsysorg/sglang:v0.5.18",
    # its own draft-mode layer counts (its engine_lists.yaml)
    draft_mode=draft_mode.geometry,
    # 0.5.23's schedule, read in 0.5.18's code: the same `adaptive_unsupported_reason` for
    # what specpair renders (EAGLE/EAGLE3 only, NEXTN already EAGLE by
    # `_resolve_speculative_algorithm_alias`; topk 1), and from
    # `resolve_candidate_steps_from_config` on the same adaptive_spec_params.py (tier
    # routing, AdaptiveStepSlot defaults) and start-up check (speculative_hook.py
    # `_init_adaptive_speculative_params`: --speculative-num-steps among the candidates).
    # Only its built-in tiers differ ([1, 3, 7], 0.5.23 [1, 3, 5, 7]), which specpair never
    # uses: it always passes its own --speculative-adaptive-config. 0.5.18's start-up runs
    # the generated tiers in tests/engine/test_mutation_oracle.py.
    schedule_refusal=schedule.refusal,
    kv_probe=functools.partial(probe.kv_probe, defaults=args.DEFAULTS,
                               script="sglang_pools_0_5_18.py", build=launch.build),
)
