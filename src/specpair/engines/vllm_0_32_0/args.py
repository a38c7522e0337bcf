"""vLLM 0.32.0's server arguments: vLLM 0.33.0's (`vllm_0_33_0/args.py`). Every default
they apply was read in both wheels and is the same (`facts.py` COMPARED_WITH: memory
utilisation, block size, the max_num_seqs / max_num_batched_tokens tiers of the catalog's
GPUs, graph capture); the one default that differs, GB10's tier, touches no catalog GPU
(`facts.DIFFERENCES`)."""

from __future__ import annotations

from specpair.engines.vllm_0_33_0.args import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    ServerArgs,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    server_args,
    speculative_tokens,
)

__all__ = ["DEFAULT_BLOCK_SIZE", "DEFAULT_GPU_MEMORY_UTILIZATION", "ServerArgs",
           "default_max_num_batched_tokens", "default_max_num_seqs", "server_args",
           "speculative_tokens"]
