"""The question `specpair verify` puts to vLLM's own KV planning for a pair: the
release's `ModelConfig` reads the config folders, each layer's spec is built with its
spec classes, and `get_kv_cache_groups`, `get_kv_cache_config_from_groups` and
`get_kv_cache_capacity` plan the block pool for the KV bytes the budget found
(harness/vllm_kv_plan.py). Shared by the vLLM releases, each with its own rules (its
server arguments, block sizes and layer plan)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from specpair.engines.kv_probe import KvProbe
from specpair.engines.launch_model import EnvRef, Launch
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0.capacity import IN_FLIGHT_BATCHES
from specpair.engines.vllm_0_33_0.facts import PROFILE
from specpair.model.budget import Budget
from specpair.model.common import Method
from specpair.model.errors import SpecpairError

LABELS = {
    "groups": "layers per KV cache group",
    "block_size": "block size (tokens)",
    "bytes_per_block": "bytes per block, all layers",
    "num_blocks": "blocks",
    "capacity_tokens": "token capacity (GPU KV cache size)",
}


def kv_probe(pair: EngineInput, budget: Budget, rules: Any, args: ModuleType,
             build: Callable[[EngineInput, bool], Launch]) -> KvProbe:
    """The pair's models and settings and the budget's KV bytes, and what the budget's
    block plan made of them; `rules` is the release's budget rules, `args` its
    server-argument module, `build` its launch (whose --kv-cache-dtype the case takes)."""
    scenario = budget.speculative or budget.baseline
    available = scenario.kv_budget_bytes
    if available <= 0:
        raise SpecpairError.single(pair.source_file, "no KV bytes are left (the budget's "
                                   "available KV memory is not positive): there is nothing "
                                   "for the engine to plan", "make the budget fit first "
                                   "(`specpair budget`)")
    rb = pair.runbook
    dep, spec = rb.deployment, rb.speculation
    server = rules.server_args(pair, pair.gpu_spec)
    plan, block, _, _ = rules.kv_plan(pair)
    in_flight = IN_FLIGHT_BATCHES * server.max_num_batched_tokens
    draft: str | None = None
    if pair.draft is not None and spec.method is not Method.NGRAM:
        draft = "bundled" if pair.draft.bundled else str(rb.draft.path if rb.draft else "")
    expected = {"groups": [n for _, n, _, _ in plan.groups],
                "block_size": block, "bytes_per_block": plan.bytes_per_block,
                "num_blocks": available // plan.bytes_per_block,
                "capacity_tokens": scenario.max_total_tokens}
    notes = ["the KV bytes are the budget's: the engine measures them at start-up"
             if scenario.capacity_estimate is None and dep.kv_cache_memory_bytes is None
             else "the KV bytes are fixed by --kv-cache-memory-bytes"
             if dep.kv_cache_memory_bytes is not None
             else f"the KV bytes are the budget's estimate ({scenario.capacity_estimate}): "
                  "the engine measures them at start-up"]
    return KvProbe(
        release=rules.engine, script="vllm_kv_plan.py", expected=expected, labels=LABELS,
        notes=notes,
        case={"target": str(rb.target.path), "draft": draft, "tp": dep.parallel.tensor,
              "draft_tp": dep.parallel.draft_tensor or dep.parallel.tensor,
              # the command's --block-size; the engine aligns a hybrid's itself
              "block_size": server.block_size,
              "kv_cache_dtype": _flag(build(pair, True).argv, "--kv-cache-dtype") or "auto",
              "max_model_len": dep.context_length, "available_bytes": available,
              "disable_hybrid_kv_cache_manager": not dep.hybrid_kv_pools,
              "max_in_flight_tokens": in_flight,
              "num_speculative_tokens": args.speculative_tokens(pair),
              "method": spec.method.value,
              "engine_method": PROFILE.method_names.get(spec.method)})


def _flag(argv: list[str | EnvRef], flag: str) -> str | None:
    """The value the command gives `flag` (None: the command leaves it unset)."""
    for i, arg in enumerate(argv[:-1]):
        following = argv[i + 1]
        if arg == flag and isinstance(following, str):
            return following
    return None
