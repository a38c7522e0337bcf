"""What vLLM 0.34.0's own log says about its start: 0.33.0's three messages, one of them
(graph capture) now written by the only model runner left."""

from __future__ import annotations

import re

from specpair.engines.logs_model import Timing

TIMINGS = (
    # model_executor/model_loader/default_loader.py:544, as in 0.33.0
    Timing("weight_load_s", re.compile(r"Loading weights took ([\d.]+) seconds"),
           "vllm model_loader/default_loader.py"),
    # v1/worker/gpu/model_runner.py:1217: "Graph capturing finished in %.0f secs, took %.2f
    # GiB" (0.33.0 also logged it from the V1 runner, v1/worker/gpu_model_runner.py)
    Timing("graph_capture_s", re.compile(r"Graph capturing finished in ([\d.]+) secs"),
           "vllm v1/worker/gpu/model_runner.py"),
    # v1/engine/core.py:459, as in 0.33.0
    Timing("engine_init_s", re.compile(
        r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
        "vllm v1/engine/core.py"),
)

# v1/core/kv_cache_utils.py:1169: "%s KV cache size: %s tokens, Maximum concurrency for %s
# tokens per request: %.2fx", the tokens written with thousands separators; with the
# extensible cache it is logged once the cache is sized from the memory measured after
# warmup (v1/core/kv_cache_planning.py:1870), so it is the capacity the engine runs with
KV_CAPACITY = re.compile(r"KV cache size: ([\d,]+) tokens")
