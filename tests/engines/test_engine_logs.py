"""Engine log lines that split the engine start. The lines are the engines' own
messages, written with the format strings of their sources (cited per line)."""

from __future__ import annotations

import pytest

from specpair.engines.log_timings import timings

# vllm/model_executor/model_loader/default_loader.py: "Loading weights took %.2f seconds"
# vllm/v1/worker/gpu_model_runner.py: "Graph capturing finished in %.0f secs, took %.2f GiB"
VLLM_TP2 = """\
(Worker_TP0 pid=11) INFO [default_loader.py:501] Loading weights took 12.50 seconds
(Worker_TP1 pid=12) INFO [default_loader.py:501] Loading weights took 12.70 seconds
(Worker_TP0 pid=11) INFO [default_loader.py:501] Loading weights took 1.25 seconds
(Worker_TP1 pid=12) INFO [default_loader.py:501] Loading weights took 1.30 seconds
(Worker_TP0 pid=11) INFO [gpu_model_runner.py] Graph capturing finished in 31 secs, took 0.52 GiB
(Worker_TP1 pid=12) INFO [gpu_model_runner.py] Graph capturing finished in 33 secs, took 0.52 GiB
(EngineCore pid=10) INFO [core.py] init engine (profile, create kv cache, warmup model) took 58.10 s
"""

# sglang/srt/model_executor/model_runner.py: f"Load weight end. elapsed={t:.2f} s, type=…"
# sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:
#   f"Capture {capture_name} CUDA graph end. elapsed={t:.2f} s, mem usage=…"
SGLANG = """\
[TP0] Load weight end. elapsed=20.31 s, type=Qwen3ForCausalLM.
[TP1] Load weight end. elapsed=20.90 s, type=Qwen3ForCausalLM.
[TP0] Capture decode CUDA graph end. elapsed=18.02 s, mem usage=0.6 GB.
[TP0] Capture draft decode CUDA graph end. elapsed=9.50 s, mem usage=0.2 GB.
"""


def test_vllm_reads_rank_zero_and_adds_target_and_draft() -> None:
    found = timings("vllm 0.33.0", VLLM_TP2)
    assert found == {"weight_load_s": pytest.approx(13.75), "graph_capture_s": 31.0,
                     "engine_init_s": 58.1}


def test_sglang_adds_the_target_and_draft_captures() -> None:
    found = timings("sglang 0.5.23", SGLANG)
    assert found == {"weight_load_s": 20.31, "graph_capture_s": pytest.approx(27.52)}


def test_an_unknown_engine_or_silent_log_gives_nothing() -> None:
    assert timings("other 1.0", VLLM_TP2) == {}
    assert timings("vllm 0.33.0", "nothing logged") == {}
