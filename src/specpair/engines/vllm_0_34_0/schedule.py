"""vLLM 0.34.0's batch-size schedule: 0.33.0's config field, validation and lookup
(v1/spec_decode/dynamic/utils.py is byte-identical in both wheels) and its data-parallel
fallback (`VllmConfig._maybe_disable_dynamic_sd_for_data_parallel`, config/vllm.py:1031).
Model Runner V1 is gone, and with it `_maybe_disable_dynamic_sd_for_v1` (0.33.0
config/vllm.py:1088) and the PIECEWISE override of full CUDA graphs
(`_maybe_override_dynamic_sd_cudagraph_mode`, 0.33.0 :1069): facts.DIFFERENCES "per-batch
schedule on Model Runner V1"."""

from __future__ import annotations

from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0.schedule import CONFIG_KEY, entries, render
from specpair.engines.vllm_0_33_0.schedule import refusal as _refusal

__all__ = ["CONFIG_KEY", "entries", "graph_note", "refusal", "render"]


def refusal(pair: EngineInput) -> str | None:
    return _refusal(pair, v1_guard=False)


def graph_note(pair: EngineInput) -> str:
    """0.33.0's note (`vllm_0_33_0.schedule.graph_note`) without its V1 clause: the engine
    captures uniform-decode graphs for each K tier of the lookup (config/vllm.py:690-700)."""
    if pair.runbook.speculation.schedule is None or pair.schedule is None:
        return ""
    tiers = sorted({r.k for r in pair.schedule.ranges})
    return ("; with the schedule the engine captures uniform-decode graphs for each "
            f"query length of its K tiers ({', '.join(str(k + 1) for k in tiers)} tokens per "
            "request, VllmConfig's capture sizes in vllm/config/vllm.py): this estimate does "
            "not grow with the tiers, declare cuda_graph_bytes from the engine's start-up log")
