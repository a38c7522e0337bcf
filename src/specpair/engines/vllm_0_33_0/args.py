"""vLLM 0.33.0's server arguments for one pair, resolved once (vllm 0.33.0:
`vllm/engine/arg_utils.py::EngineArgs`).

Every default of this release that the launch passes and the budget reads is applied here
and nowhere else: the launch renders `ServerArgs`, the budget computes from it, so the
budget is always of the server the command starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from specpair.engines.args_model import ServerArg
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0.facts import PROFILE
from specpair.facts.hardware import GPU
from specpair.model.budget import GiB
from specpair.model.common import Method

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # CacheConfig.gpu_memory_utilization
DEFAULT_BLOCK_SIZE = PROFILE.default_page_size  # CacheConfig.block_size on CUDA


def default_max_num_seqs(gpu: GPU) -> int:
    """`EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`, `vllm serve`."""
    mem_gib = gpu.memory_bytes / GiB
    if mem_gib >= 160 or (mem_gib >= 70 and not gpu.key.startswith("A100")):
        return 1024
    return 256


def default_max_num_batched_tokens(gpu: GPU) -> int:
    """`EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`, `vllm serve`."""
    mem_gib = gpu.memory_bytes / GiB
    if mem_gib >= 160:
        return 16384
    if mem_gib >= 70 and not gpu.key.startswith("A100"):
        return 8192
    return 2048


def speculative_tokens(pair: EngineInput) -> int:
    """K, draft tokens per step, as vLLM counts them."""
    spec = pair.runbook.speculation
    if spec.method is Method.DSPARK:
        assert spec.block_size is not None
        return spec.block_size  # DSpark K defaults to the checkpoint block_size
    if spec.method is Method.DFLASH:
        assert spec.block_size is not None
        return spec.block_size - 1  # the block's first slot is the last accepted token
    tokens = spec.num_speculative_tokens or spec.num_steps  # a tree's depth; pre-flight refuses
    assert tokens is not None, "validated by rules.check_runbook"
    return tokens


@dataclass(frozen=True)
class ServerArgs:
    gpu_memory_utilization: float
    """Ignored by the engine when kv_cache_memory_bytes is set (the flag is not passed)."""
    kv_cache_memory_bytes: int | None
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    num_speculative_tokens: int | None
    """K; None only for a runbook the loader would refuse (no depth at all)."""
    enforce_eager: bool
    defaulted: frozenset[str]

    def rows(self) -> list[ServerArg]:
        def row(key: str, label: str, flag: str, value: object, name: str) -> ServerArg:
            return ServerArg(key, label, flag, f"{value:g}" if isinstance(value, float)
                             else str(value), name in self.defaulted)
        rows = [
            row("memory_fraction", "memory fraction", "--gpu-memory-utilization",
                self.gpu_memory_utilization, "gpu_memory_utilization"),
            row("page_size", "KV block size (tokens)", "--block-size", self.block_size,
                "block_size"),
            row("max_running_requests", "running requests", "--max-num-seqs",
                self.max_num_seqs, "max_num_seqs"),
            row("batched_tokens", "tokens per scheduler step", "--max-num-batched-tokens",
                self.max_num_batched_tokens, "max_num_batched_tokens"),
            row("speculative_tokens", "draft tokens per step",
                "--speculative-config num_speculative_tokens", self.num_speculative_tokens,
                "num_speculative_tokens"),
            row("cuda_graphs", "CUDA graphs", "--enforce-eager (off)", not self.enforce_eager,
                "enforce_eager"),
        ]
        return rows


def server_args(pair: EngineInput, gpu: GPU) -> ServerArgs:
    dep = pair.runbook.deployment
    spec = pair.runbook.speculation
    defaulted = {name for name, value in (
        ("gpu_memory_utilization", dep.memory_fraction),
        ("block_size", dep.page_size), ("max_num_seqs", dep.max_running_requests))
        if value is None} | {"max_num_batched_tokens"}
    return ServerArgs(
        gpu_memory_utilization=dep.memory_fraction or DEFAULT_GPU_MEMORY_UTILIZATION,
        kv_cache_memory_bytes=dep.kv_cache_memory_bytes,
        block_size=dep.page_size or DEFAULT_BLOCK_SIZE,
        max_num_seqs=dep.max_running_requests or default_max_num_seqs(gpu),
        max_num_batched_tokens=default_max_num_batched_tokens(gpu),
        num_speculative_tokens=speculative_tokens(pair)
        if spec.method.is_block_drafter or spec.num_speculative_tokens or spec.num_steps
        else None,
        enforce_eager=not dep.cuda_graphs,
        defaulted=frozenset(defaulted))
