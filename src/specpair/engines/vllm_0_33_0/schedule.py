"""vLLM 0.33.0's batch-size schedule (dynamic speculative decoding), as its code runs it.

`SpeculativeConfig.num_speculative_tokens_per_batch_size` (vllm/config/speculative.py):
inclusive `(range_start, range_end, K)` entries. The scheduler expands them into a dense
batch size → K lookup at start-up (`build_dynamic_sd_schedule_lookup`,
vllm/v1/spec_decode/dynamic/utils.py): the first range must start at 1, ranges sorted and
non-overlapping, K ≥ 0 (0: no drafts in that step); gaps and the tail carry the previous
K forward; every K is clamped to `num_speculative_tokens` (`min(...)`), which stays what
the engine is sized for: the KV lookahead slots, the draft/verify buffers and the CUDA
graphs' decode query length (`VllmConfig` builds one capture tier per distinct K of the
lookup, vllm/config/vllm.py). The batch is the number of requests scheduled in the step
(`len(num_scheduled_tokens)` in `Scheduler.schedule`).

Where 0.33.0 silently drops the schedule (a warning, then the static K), specpair refuses:
- data parallelism > 1 (`VllmConfig._maybe_disable_dynamic_sd_for_data_parallel`: "data-
  parallel ranks can select different speculative-token counts, causing DP divergence and
  deadlocks");
- Model Runner V1 with a method whose proposer cannot truncate drafts
  (`_maybe_disable_dynamic_sd_for_v1`: supported are ngram, eagle, eagle3, mtp,
  draft_model, dflash; V2 truncates centrally).
"""

from __future__ import annotations

from typing import Any

from specpair.engines.launch_model import Preflights
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0.facts import PROFILE

CONFIG_KEY = "num_speculative_tokens_per_batch_size"
V1_SCHEDULE_METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")
"""`VllmConfig._maybe_disable_dynamic_sd_for_v1` (vllm/config/vllm.py, 0.33.0)."""


def refusal(pair: EngineInput, v1_guard: bool = True) -> str | None:
    """Why this release cannot run a schedule for the pair (None: it can)."""
    rb = pair.runbook
    spec = rb.speculation
    method = PROFILE.method_names.get(spec.method, spec.method.value)
    if spec.method.is_block_drafter or spec.topk != 1:
        return (f"{method} drafts a fixed shape; a schedule varies the length of a chain "
                "(specpair derives schedules for chain drafters only)")
    if rb.deployment.parallel.data > 1:
        return ("with data parallelism > 1 the engine disables "
                f"{CONFIG_KEY} and falls back to the static num_speculative_tokens "
                "(vllm/config/vllm.py _maybe_disable_dynamic_sd_for_data_parallel: "
                "data-parallel ranks could pick different K and deadlock)")
    if v1_guard and method not in V1_SCHEDULE_METHODS:
        return (f"on Model Runner V1 the engine disables {CONFIG_KEY} for method "
                f"{method!r} (vllm/config/vllm.py _maybe_disable_dynamic_sd_for_v1 supports "
                + ", ".join(V1_SCHEDULE_METHODS) + ")")
    return None


def entries(pair: EngineInput) -> list[list[int]]:
    """The schedule as the config's inclusive [start, end, K] entries."""
    assert pair.schedule is not None
    return [[r.start, r.end, r.k] for r in pair.schedule.ranges]


def render(pair: EngineInput, config: dict[str, Any], checks: Preflights,
           reason: str | None) -> None:
    """Adds the schedule to the speculative-config JSON, or refuses it by name."""
    if pair.runbook.speculation.schedule is None:
        return
    checks.need(reason is None, "speculation.schedule",
                f"cannot run a speculation schedule: {reason}",
                "remove speculation.schedule (static K), or change what the engine names")
    if reason is None and pair.schedule is not None:
        config[CONFIG_KEY] = entries(pair)


def graph_note(pair: EngineInput) -> str:
    """What a schedule changes in the CUDA-graph memory this release captures: '' without
    one. The KV lookahead slots and the draft/verify buffers stay sized for
    num_speculative_tokens (`VllmConfig.num_lookahead_tokens`), the schedule's largest K,
    so the KV budget is unchanged; the graphs are not (the estimate is an assumption)."""
    if pair.runbook.speculation.schedule is None or pair.schedule is None:
        return ""
    tiers = sorted({r.k for r in pair.schedule.ranges})
    return ("; with the schedule the engine captures uniform-decode graphs for each "
            f"query length of its K tiers ({', '.join(str(k + 1) for k in tiers)} tokens per "
            "request, VllmConfig's capture sizes in vllm/config/vllm.py) and, on Model Runner "
            "V1, turns full CUDA graphs into PIECEWISE "
            "(_maybe_override_dynamic_sd_cudagraph_mode): this estimate does not grow with "
            "the tiers, declare cuda_graph_bytes from the engine's start-up log")
