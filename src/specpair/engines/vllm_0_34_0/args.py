"""vLLM 0.34.0's server arguments for one pair: 0.33.0's (`vllm_0_33_0/args.py`; the
max_num_seqs / max_num_batched_tokens tiers and the K per method are the same in both
wheels, facts.COMPARED_WITH) but for the reviewed defaults in `facts.DIFFERENCES`: the
block size (64), the KV cache sizing mode with its memory fraction, and the DFlash/DSpark
cap on running sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

from specpair.engines.args_model import ServerArg
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0.args import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    ServerArgs,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    speculative_tokens,
)
from specpair.engines.vllm_0_34_0.facts import EXTENSIBLE_DEFAULT_MEMORY_UTILIZATION, PROFILE
from specpair.facts.hardware import GPU
from specpair.model.common import Method

__all__ = ["DEFAULT_BLOCK_SIZE", "DEFAULT_GPU_MEMORY_UTILIZATION",
           "EXTENSIBLE_DEFAULT_MEMORY_UTILIZATION", "ServerArgs34",
           "default_max_num_batched_tokens", "default_max_num_seqs", "draft_queries",
           "server_args", "speculative_tokens"]

DEFAULT_BLOCK_SIZE = PROFILE.default_page_size  # CacheConfig.DEFAULT_BLOCK_SIZE (64)


def draft_queries(method: Method, k: int) -> int | None:
    """Queries the draft pass runs per request where it is sized by max_num_batched_tokens
    (`SpeculatorConfig.num_lookahead_tokens` of the drafters whose `max_num_draft_seqs` is
    not None), else None. DFlash: K + 1 (dflash/config.py:52-56); DSpark subclasses it and
    drafts K queries when it samples from the anchor, the default when the draft's config
    does not say `sample_from_anchor: false` (dspark/config.py:129-137)."""
    if method is Method.DFLASH:
        return k + 1
    if method is Method.DSPARK:
        return k
    return None


@dataclass(frozen=True)
class ServerArgs34(ServerArgs):
    kv_cache_sizing: str = "pinned"
    """`pinned`: --kv-cache-memory-bytes (the extensible cache off); `measured`: the
    extensible cache sizes the KV after warmup (config/vllm.py:3180-3254)."""
    kv_cache_sizing_defaulted: bool = True
    max_num_active_seqs: int | None = None
    """The DFlash/DSpark cap the engine sets (config/vllm.py:2300-2319); None: no cap."""

    @property
    def running_requests(self) -> int:
        """Requests the scheduler runs at once: max_num_seqs under the drafter's cap."""
        cap = self.max_num_active_seqs
        return self.max_num_seqs if cap is None else min(self.max_num_seqs, cap)

    def rows(self) -> list[ServerArg]:
        rows = []
        for row in super().rows():
            if row.key == "memory_fraction":
                how = ("the extensible cache's default (CacheConfig."
                       "resolved_gpu_memory_utilization)" if self.kv_cache_sizing == "measured"
                       else "not passed: specpair computes --kv-cache-memory-bytes from it")
                row = ServerArg(row.key, row.label, row.flag, row.value, row.default, how)
            rows.append(row)
        rows.append(ServerArg("kv_sizing", "KV cache sizing",
                              "--kv-cache-memory-bytes (pinned) / extensible KV cache "
                              "(measured)", self.kv_cache_sizing, self.kv_cache_sizing_defaulted))
        if self.max_num_active_seqs is not None:
            rows.append(ServerArg("active_seqs_cap", "running requests cap of the draft pass",
                                  "(none: max_num_batched_tokens // draft queries)",
                                  str(self.max_num_active_seqs), True))
        return rows


def server_args(pair: EngineInput, gpu: GPU) -> ServerArgs34:
    dep = pair.runbook.deployment
    spec = pair.runbook.speculation
    measured = dep.kv_cache_sizing == "measured"
    defaulted = {name for name, value in (
        ("gpu_memory_utilization", dep.memory_fraction),
        ("block_size", dep.page_size), ("max_num_seqs", dep.max_running_requests))
        if value is None} | {"max_num_batched_tokens"}
    k = speculative_tokens(pair) \
        if spec.method.is_block_drafter or spec.num_speculative_tokens or spec.num_steps \
        else None
    batched = default_max_num_batched_tokens(gpu)
    queries = draft_queries(spec.method, k) if k is not None else None
    return ServerArgs34(
        gpu_memory_utilization=dep.memory_fraction or (
            EXTENSIBLE_DEFAULT_MEMORY_UTILIZATION if measured
            else DEFAULT_GPU_MEMORY_UTILIZATION),
        kv_cache_memory_bytes=dep.kv_cache_memory_bytes,
        block_size=dep.page_size or DEFAULT_BLOCK_SIZE,
        max_num_seqs=dep.max_running_requests or default_max_num_seqs(gpu),
        max_num_batched_tokens=batched,
        num_speculative_tokens=k,
        enforce_eager=not dep.cuda_graphs,
        defaulted=frozenset(defaulted),
        kv_cache_sizing=dep.kv_cache_sizing,
        kv_cache_sizing_defaulted="kv_cache_sizing" not in dep.model_fields_set,
        max_num_active_seqs=batched // queries if queries else None)
