"""SGLang 0.5.18's own KV pool sizing for a list of launch commands (run by the oracle test
with 0.5.18's folder first on PYTHONPATH, tests/engine/releases.py).

The same cases and results as sglang_pools.py (0.5.23), through 0.5.18's own steps, in the
model runner's order (model_executor/model_runner.py:576-604, :647-658):
`prepare_server_args` (0.5.18 resolves while parsing, in `ServerArgs.__post_init__`),
`RuntimeContext.set_server_args`, `ModelConfig.from_server_args`, the scheduler's
`ParallelState` (managers/scheduler.py:465), `configure_kv_cache_dtype`,
`resolve_spec_aux_hidden_state_config`, `resolve_layer_indices(..., spec_algorithm)`,
`adjust_hybrid_swa_layer_ids`, then `KVCacheConfigurator` and
`create_memory_pool_configurator(...).calculate_pool_sizes`.

0.5.18's pool code reads the TP widths from the live torch.distributed groups
(`get_parallel().attn_tp_size` → parallel_state.get_attn_tensor_model_parallel_world_size:
"attention tensor model parallel group is not initialized" without them). So:

- ONE_RANK_GROUP: a one-rank gloo process group on 127.0.0.1 and SGLang's own
  `init_distributed_environment`, `initialize_model_parallel` and, per case,
  `initialize_dp_attention`: what distributed/bootstrap.py::_init_parallel_groups runs
  at start-up, for a world of one rank.
- TP_SIZES_WITHOUT_RANKS (TP > 1): one process cannot hold the other ranks, and pool
  sizing needs only the widths, not a communicator (no collective runs on this path: each
  rank derives its own pool from its share of the heads). The widths come from the
  engine's own test hook, `get_parallel().override(tp_size=..., attn_tp_size=...)`
  ("force a topology without monkeypatching the underlying getters",
  runtime_context.py), and the `ParallelState` is the one the scheduler builds for rank 0
  (`compute_dp_attention_world_info`).
- GPU_RUNTIME_STUB (stand_ins.py) before parsing, since 0.5.18 resolves there: the
  device is "cuda" with an H100's memory, and `server_args.is_cuda` answers True for the
  platform check of the hybrid-state strategy ("extra_buffer needs CUDA/..."), which is
  what the launch's target machine answers.
- NO_LOADED_MODEL, the mxfp4 registration and the torchvision placeholder as in
  sglang_pools.py. `resolve_speculative` cases need nothing more: 0.5.18 runs its
  speculative resolution while parsing, on the stubbed device.
"""

from __future__ import annotations

import functools
import socket
from typing import Any

from sglang_pools import (
    NO_LOADED_MODEL,
    _install_torchvision_placeholder,
    _register_cuda_quantization,
    pools_report,
    run,
    size_all,
)
from stand_ins import gpu_runtime_stub


def _one_rank_group() -> None:
    """ONE_RANK_GROUP: torch.distributed and SGLang's model-parallel groups, world size 1."""
    from sglang.srt.distributed.parallel_state import (
        init_distributed_environment,
        initialize_model_parallel,
    )

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                 distributed_init_method=f"tcp://127.0.0.1:{port}")
    initialize_model_parallel(tensor_model_parallel_size=1, backend="gloo")


def size(argv: list[str], rest_gib: float, resolve_speculative: bool = False
         ) -> dict[str, Any]:
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.layers.dp_attention import initialize_dp_attention
    from sglang.srt.mem_cache import kv_cache_dtype
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import (
        adjust_hybrid_swa_layer_ids,
        resolve_layer_indices,
    )
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import (
        get_context,
        get_model,
        get_parallel,
        get_schedule,
        get_spec,
    )
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    server_args = prepare_server_args(argv)  # resolved here (ServerArgs.__post_init__)
    get_context().set_server_args(server_args)
    model_config = ModelConfig.from_server_args(server_args)
    initialize_dp_attention(server_args, model_config)
    parallel = get_parallel()
    tp = server_args.tp_size
    ps = rank0_state(server_args, parallel)
    with parallel.override(tp_size=tp, attn_tp_size=ps.attn_tp_size):  # TP_SIZES_WITHOUT_RANKS
        algorithm = SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm)
        _, kv_dtype = kv_cache_dtype.configure_kv_cache_dtype(
            server_args_kv_cache_dtype=get_model().kv_cache_dtype, model=NO_LOADED_MODEL,
            model_dtype=model_config.dtype, is_draft_worker=False,
            is_dflash=algorithm.is_dflash_family(),
            speculative_draft_attention_backend=get_spec().speculative_draft_attention_backend,
            speculative_draft_kv_cache_dtype=get_spec().speculative_draft_kv_cache_dtype)
        spec_aux = resolve_spec_aux_hidden_state_config(
            server_args=server_args, model_config=model_config, spec_algorithm=algorithm,
            is_draft_worker=False)
        layer_info = resolve_layer_indices(model=NO_LOADED_MODEL, model_config=model_config,
                                           is_draft_worker=False, spec_algorithm=algorithm)
        adjust_hybrid_swa_layer_ids(
            model_config=model_config, start_layer=layer_info.start_layer,
            end_layer=layer_info.end_layer, is_hybrid_swa=model_config.is_hybrid_swa)
        page_size = int(server_args.page_size or 1)
        kvc = KVCacheConfigurator(
            device="cuda", gpu_id=0, ps=ps, pp_group=None, model=NO_LOADED_MODEL,
            model_config=model_config, server_args=server_args, kv_cache_dtype=kv_dtype,
            kv_cache_dtype_str=get_model().kv_cache_dtype, model_dtype=model_config.dtype,
            page_size=page_size,
            sliding_window_size=model_config.sliding_window_size
            if model_config.is_hybrid_swa else None,
            spec_algorithm=algorithm, is_draft_worker=False, post_capture_kv_active=False,
            spec_aux_config=spec_aux, is_hybrid_swa=model_config.is_hybrid_swa,
            is_hybrid_swa_compress=model_config.is_hybrid_swa_compress,
            use_mla_backend=model_config.attention_arch == AttentionArch.MLA,
            layer_info=layer_info, forward_stream=None, req_to_token_pool=None,
            token_to_kv_pool_allocator=None, memory_pool_config=None)
        state_slots = None
        if kvc.mambaish_config is not None:
            rest_gib = kvc._handle_max_mamba_cache(rest_gib)
            state_slots = get_schedule().max_mamba_cache_size
        available_bytes = int(rest_gib * (1 << 30))
        configurator = create_memory_pool_configurator(kvc)
        config = configurator.calculate_pool_sizes(available_bytes, page_size)
        return report(argv, configurator, config, kv_dtype, available_bytes, state_slots,
                      model_config)


def rank0_state(server_args: Any, parallel: Any) -> Any:
    """The parallel state rank 0 holds (managers/scheduler.py:465)."""
    from sglang.srt.distributed.parallel_state_wrapper import ParallelState
    from sglang.srt.layers.dp_attention import compute_dp_attention_world_info

    tp = server_args.tp_size
    attn_tp_rank, attn_tp_size, attn_dp_rank, attn_dp_size = compute_dp_attention_world_info(
        parallel.enable_dp_attention, 0, tp, parallel.dp_size, server_args.attn_cp_size)
    return ParallelState(
        tp_rank=0, tp_size=tp, pp_rank=0, pp_size=server_args.pp_size, dp_rank=None,
        dp_size=parallel.dp_size, attn_tp_rank=attn_tp_rank, attn_tp_size=attn_tp_size,
        attn_cp_rank=0, attn_cp_size=server_args.attn_cp_size, attn_dcp_rank=0,
        attn_dcp_size=server_args.dcp_size, attn_dp_rank=attn_dp_rank,
        attn_dp_size=attn_dp_size, moe_ep_rank=0, moe_ep_size=parallel.ep_size,
        moe_dp_rank=0, moe_dp_size=server_args.moe_dp_size, gpu_id=0)


def report(argv: list[str], configurator: Any, config: Any, kv_dtype: Any,
           available_bytes: int, state_slots: int | None, model_config: Any
           ) -> dict[str, Any]:
    """`pools_report` (inside the TP override, whose widths it reports), with the layer
    ids 0.5.18 keeps on its model config."""
    return {
        **pools_report(argv, configurator, config, kv_dtype, available_bytes, state_slots),
        "full_attention_layers": len(getattr(model_config, "full_attention_layer_ids",
                                             None) or []) or None,
        "swa_attention_layers": len(getattr(model_config, "swa_attention_layer_ids",
                                            None) or []) or None,
    }


@functools.cache
def _set_up() -> None:
    _install_torchvision_placeholder()
    _register_cuda_quantization()
    gpu_runtime_stub()
    import sglang.srt.server_args as server_args_module

    server_args_module.is_cuda = lambda: True  # GPU_RUNTIME_STUB: the platform check
    _one_rank_group()


def batch(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases of one call in a long-lived process (tests/engine/workers.py): the
    stand-ins and the one-rank group once, then each case as main() sizes it."""
    _set_up()
    return size_all(size, cases)


def main() -> None:
    _set_up()
    run(size)


if __name__ == "__main__":
    main()
