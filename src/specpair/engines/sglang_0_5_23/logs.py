"""What SGLang 0.5.23's own log says about its start; each pattern is the engine's log
message, cited by file."""

from __future__ import annotations

import re

from specpair.engines.logs_model import Timing

TIMINGS = (
    # sglang/srt/model_executor/model_runner.py: "Load weight end. elapsed=%.2f s, ..."
    Timing("weight_load_s", re.compile(r"Load weight end\. .*?elapsed=([\d.]+) s"),
           "sglang srt/model_executor/model_runner.py"),
    # sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:
    # "Capture {name} CUDA graph end. elapsed=%.2f s, ..." (the draft workers log their own)
    Timing("graph_capture_s", re.compile(r"Capture .*?CUDA graph end\. elapsed=([\d.]+) s"),
           "sglang srt/model_executor/model_runner_components/cuda_graph_setup.py"),
)
