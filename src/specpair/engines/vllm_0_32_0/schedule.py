"""vLLM 0.32.0's batch-size schedule: the same config field, validation and lookup as
0.33.0 (vllm/v1/spec_decode/dynamic/utils.py is identical in both releases), and the same
data-parallel fallback (`VllmConfig._maybe_disable_dynamic_sd_for_data_parallel`). 0.32.0
has no `_maybe_disable_dynamic_sd_for_v1`: it does not drop the schedule by method (every
chain method specpair renders is one 0.33.0 supports on V1 too)."""

from __future__ import annotations

from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0.schedule import CONFIG_KEY, entries, graph_note, render
from specpair.engines.vllm_0_33_0.schedule import refusal as _refusal

__all__ = ["CONFIG_KEY", "entries", "graph_note", "refusal", "render"]


def refusal(pair: EngineInput) -> str | None:
    return _refusal(pair, v1_guard=False)
