"""SGLang 0.5.23's own KV pool sizing for a list of launch commands (run by the oracle test;
0.5.18's is sglang_pools_0_5_18.py, which shares the case loop and stand-ins below).

Reads a JSON list of cases on stdin, each `{"argv": [...], "rest_gib": x}` (the argv of
a `sglang serve` command without the program name, and the budget left for the pools
after weights and the static slack, in GiB as the engine holds it), and prints one JSON
list of results: the linear-attention state slots a hybrid takes first
(`_handle_max_mamba_cache`), the pool configurator the engine picks, its bytes per token,
and the pool sizes its `calculate_pool_sizes` returns for the bytes left.

Everything that decides the numbers is the engine's own code: `prepare_server_args`
parses the argv; the parsed record is published as the runtime context
(`RuntimeContext.set_server_args`), which gives the TP widths, the SWA ratio and the
speculative flags; `ModelConfig` reads the config.json; `configure_kv_cache_dtype`,
`resolve_spec_aux_hidden_state_config` and `resolve_layer_indices` are the model runner's
own steps; `KVCacheConfigurator` and `create_memory_pool_configurator` size the pools.

Stand-ins, because no GPU runs here:
- `RESOLVED_SPECULATION` (cases with `"resolve_speculative": true`): the engine resolves
  its speculative arguments (a block drafter's draft tokens, among others) in
  `ServerArgs.resolve_once`, whose pipeline stops without an accelerator. Such a case runs
  the engine's own speculative step (`handle_speculative_decoding`) alone, with the device
  a GPU host resolves (`--device cuda`); the other cases skip resolution as before.
- `NO_LOADED_MODEL`: the runner passes its loaded `nn.Module`; none is loaded here. The
  pool code reads only optional attributes from it (a PP slice, a quantized-KV config);
  without them the engine uses the config's layer count and the model dtype.
- The CUDA quantization registry: on a GPU host `mxfp4` is registered (gpt-oss ships
  mxfp4 weights); this CPU host does not register it, so the test adds the engine's own
  `Mxfp4Config` under that name. Weight quantization does not enter KV sizing.
- torchvision is absent from the engine venv (its CUDA build crashes next to the CPU
  torch); SGLang's multimodal config modules import it at module level, so an empty
  placeholder module is installed. No text-model code path uses it.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any


def _install_torchvision_placeholder() -> None:
    # the import-only stand-in (the harness folder is on sys.path)
    from stand_ins import TorchvisionStandIn

    sys.meta_path.insert(0, TorchvisionStandIn())


def _register_cuda_quantization() -> None:
    from sglang.srt.layers import quantization
    from sglang.srt.layers.quantization.mxfp4 import Mxfp4Config

    quantization.QUANTIZATION_METHODS.setdefault("mxfp4", Mxfp4Config)
    quantization.BASE_QUANTIZATION_METHODS.setdefault("mxfp4", Mxfp4Config)


NO_LOADED_MODEL = None
RATIOS = ("swa_full_tokens_ratio", "mamba_full_memory_ratio")


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def parser_defaults(argv: list[str]) -> dict[str, Any]:
    """What the release's own parser gives the ratios a command may leave unset (the
    command already parsed once in `prepare_server_args`; an exit here is not expected,
    but must not end the other cases)."""
    try:
        ns = _parser().parse_args(argv)
    except SystemExit as exit_:
        return {"parser_exit": str(exit_.code)}
    return {name: getattr(ns, name) for name in RATIOS}


def size(argv: list[str], rest_gib: float, resolve_speculative: bool = False
         ) -> dict[str, Any]:
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.mem_cache import kv_cache_dtype
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import (
        resolve_layer_indices,
    )
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.model_executor.pool_configurator import (
        AttentionArch,
        create_memory_pool_configurator,
    )
    from sglang.srt.runtime_context import (
        get_context,
        get_model,
        get_schedule,
        get_spec,
    )
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    server_args = parse(argv, resolve_speculative)
    get_context().set_server_args(server_args)
    model_config = ModelConfig.from_server_args(server_args)
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
                                       is_draft_worker=False)
    page_size = int(server_args.page_size or 1)
    kvc = KVCacheConfigurator(
        device="cuda", gpu_id=0, attn_dp_size=1, pp_size=1, pp_group=None,
        model=NO_LOADED_MODEL, model_config=model_config, server_args=server_args,
        kv_cache_dtype=kv_dtype, kv_cache_dtype_str=get_model().kv_cache_dtype,
        model_dtype=model_config.dtype, page_size=page_size,
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
    return report(argv, configurator, config, kvc, kv_dtype, available_bytes, state_slots,
                  spec_aux, layer_info)


def parse(argv: list[str], resolve_speculative: bool) -> Any:
    """The release's server arguments for `argv`."""
    from sglang.srt.server_args import prepare_server_args

    if not resolve_speculative:
        return prepare_server_args(argv)
    # RESOLVED_SPECULATION: the engine resolves its speculative arguments in
    # ServerArgs.resolve_once, whose pipeline needs an accelerator; run its own
    # speculative step alone, with the device a GPU host resolves (cuda)
    from sglang.srt.arg_groups.resolution_hooks import run_hook
    from sglang.srt.arg_groups.speculative_hook import handle_speculative_decoding

    server_args = prepare_server_args([*argv, "--device", "cuda"])
    run_hook(handle_speculative_decoding, server_args)
    return server_args


def pools_report(argv: list[str], configurator: Any, config: Any, kv_dtype: Any,
                 available_bytes: int, state_slots: int | None) -> dict[str, Any]:
    """What the pool code decided, as the oracle and `specpair verify` compare it: the
    part every release reports alike (0.5.18's adds its own keys)."""
    import sglang
    import torch
    from sglang.srt.runtime_context import get_parallel, get_schedule

    return {
        "ok": True,
        "version": sglang.__version__,
        "configurator": type(configurator).__name__,
        "cell": getattr(configurator, "_cell_size", None),
        "kv_dtype_bytes": torch._utils._element_size(kv_dtype),
        "attn_tp_size": get_parallel().attn_tp_size,
        "available_bytes": available_bytes,
        "state_slots": state_slots,
        "max_total_num_tokens": config.max_total_num_tokens,
        "full_max_total_num_tokens": config.full_max_total_num_tokens,
        "swa_max_total_num_tokens": config.swa_max_total_num_tokens,
        # the ratios the pool code reads (unset: the fields' fallback, schedule.py), and
        # what the parser alone gives them
        "swa_full_tokens_ratio": get_schedule().swa_full_tokens_ratio,
        "mamba_full_memory_ratio": get_schedule().mamba_full_memory_ratio,
        "parser_defaults": parser_defaults(argv),
    }


def report(argv: list[str], configurator: Any, config: Any, kvc: Any, kv_dtype: Any,
           available_bytes: int, state_slots: int | None, spec_aux: Any, layer_info: Any
           ) -> dict[str, Any]:
    """`pools_report`, with what 0.5.23 resolves besides: the draft's layers and cell and
    the layer ids its runner resolved."""
    return {
        **pools_report(argv, configurator, config, kv_dtype, available_bytes, state_slots),
        "eagle_draft_num_layers": spec_aux.eagle_draft_num_layers,
        "dflash_draft_cell": kvc.dflash_draft_cell_size_per_token,
        "full_attention_layers": len(layer_info.full_attention_layer_ids or [])
        if layer_info.full_attention_layer_ids is not None else None,
        "swa_attention_layers": len(layer_info.swa_attention_layer_ids or [])
        if layer_info.swa_attention_layer_ids is not None else None,
    }


def size_all(sizer: Callable[[list[str], float, bool], dict[str, Any]],
             cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each case through `sizer`, in order; a case's exception is its result."""
    results = []
    for case in cases:
        try:
            results.append(sizer(case["argv"], float(case["rest_gib"]),
                                 bool(case.get("resolve_speculative"))))
        except Exception as error:  # reported per case to the test
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}",
                            "trace": traceback.format_exc(limit=6)[-2000:]})
    return results


def run(sizer: Callable[[list[str], float, bool], dict[str, Any]]) -> None:
    """Each case of stdin through `sizer`, one JSON list of results on stdout."""
    print(json.dumps(size_all(sizer, json.loads(sys.stdin.read()))))


@functools.cache
def _set_up() -> None:
    _install_torchvision_placeholder()
    _register_cuda_quantization()


def batch(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases of one call in a long-lived process (tests/engine/workers.py): the
    stand-ins once, then each case as main() sizes it."""
    _set_up()
    return size_all(size, cases)


def main() -> None:
    _set_up()
    run(size)


if __name__ == "__main__":
    main()
