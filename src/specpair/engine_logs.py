"""What an engine's own log says about its start: weight load, graph capture, init.

The deployment log times the start from outside (launch → /health). Where the engine
writes how long its parts took, these lines split that phase, so the staging model's
disk bandwidth and graph-capture assumptions can be checked. Each pattern is the
engine's own log message, cited by file; the numbers are the engine's, not ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    key: str
    pattern: re.Pattern[str]
    source: str


VLLM = (
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
SGLANG = (
    # sglang/srt/model_executor/model_runner.py: "Load weight end. elapsed=%.2f s, ..."
    Timing("weight_load_s", re.compile(r"Load weight end\. .*?elapsed=([\d.]+) s"),
           "sglang srt/model_executor/model_runner.py"),
    # sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:
    # "Capture {name} CUDA graph end. elapsed=%.2f s, ..." (the draft workers log their own)
    Timing("graph_capture_s", re.compile(r"Capture .*?CUDA graph end\. elapsed=([\d.]+) s"),
           "sglang srt/model_executor/model_runner_components/cuda_graph_setup.py"),
)
TIMINGS = {"vllm": VLLM, "sglang": SGLANG}
OTHER_RANK = re.compile(r"TP0*[1-9]")


def timings(engine: str, text: str) -> dict[str, float]:
    """Sums of each timing the engine logged (a draft model or several graph captures
    add up: they run one after the other)."""
    found: dict[str, float] = {}
    # ranks load and capture at the same time: read rank 0 only (both engines prefix
    # worker lines with their tensor-parallel rank, e.g. `Worker_TP1`, `TP1`)
    lines = [line for line in text.splitlines() if not OTHER_RANK.search(line)]
    for timing in TIMINGS.get(engine.split()[0], ()):
        values = [float(m.group(1)) for line in lines for m in timing.pattern.finditer(line)]
        if values:
            found[timing.key] = round(sum(values), 3)
    return found
