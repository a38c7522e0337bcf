"""What vLLM 0.32.0's own log says about its start; each pattern is the engine's log
message, cited by file."""

from __future__ import annotations

import re

from specpair.engines.logs_model import Timing

TIMINGS = (
    # vllm/model_executor/model_loader/default_loader.py: logger.info("Loading weights took
    # %.2f seconds", ...): reading the checkpoint into the model, per worker
    Timing("weight_load_s", re.compile(r"Loading weights took ([\d.]+) seconds"),
           "vllm model_loader/default_loader.py"),
    # vllm/v1/worker/gpu_model_runner.py: "Graph capturing finished in %.0f secs, took %.2f GiB"
    Timing("graph_capture_s", re.compile(r"Graph capturing finished in ([\d.]+) secs"),
           "vllm v1/worker/gpu_model_runner.py"),
    # vllm/v1/engine/core.py: "init engine (profile, create kv cache, warmup model) took %.2f s"
    Timing("engine_init_s", re.compile(
        r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
        "vllm v1/engine/core.py"),
)
