"""vLLM 0.33.0's own KV-cache planning for a list of cases (run by the oracle test).

Reads a JSON list of cases on stdin and prints one JSON list of results: the KV cache
groups, bytes per block, blocks and the capacity vLLM reports ("GPU KV cache size: N
tokens") for the given KV budget. The numbers come from the engine's own code:
`ModelConfig` reads the config.json (head counts per rank, head size, dtype, MLA);
each layer's spec is built with the engine's spec classes the way `Attention` /
`MLAAttention.get_kv_cache_spec` build them; `get_kv_cache_groups`,
`get_kv_cache_config_from_groups` and `get_kv_cache_capacity` plan the pool.

Stand-ins, because no GPU runs here (each named where it is used):
- `IN_PROCESS_REGISTRY`: vLLM inspects a model class in a fresh subprocess (CUDA
  safety); here the inspection runs in-process, which gives the same answer faster.
- `ENGINE_CONFIG`: the engine's `VllmConfig` applies the CUDA platform's settings in its
  constructor, which needs a GPU. The planning functions read only the sub-configs
  (real `ModelConfig`, `CacheConfig`, `ParallelConfig`, `AttentionConfig`), the
  scheduler's hybrid-manager switch and `max_in_flight_tokens`, so those are handed over
  in a namespace, with the in-flight token count the case states.
- `LAYER_KINDS`: which layers slide is decided in each model's constructor; for the
  corpus families that is `layer_types` in the config (gpt_oss.py:175 slides the even
  layers, which is what gpt-oss's layer_types say; the test checks that they agree).
- The sliding layers' block size is the primary block size: the attention backend
  vLLM picks on Hopper (FLASH_ATTN) runs it unsplit (attention.py:611-660).
- The KV cache layout: the backends vLLM picks on Hopper (FLASH_ATTN, FLASH_ATTN_MLA)
  declare none, so the engine's `get_supported_kv_cache_layouts` gives its default
  preference and `resolve_kv_cache_layout` picks from it.
"""

from __future__ import annotations

import json
import sys
import traceback
import types
from typing import Any


def plan(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.config import AttentionConfig, CacheConfig, ModelConfig, ParallelConfig
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core.kv_cache_planning import (
        get_kv_cache_config_from_groups,
        get_kv_cache_groups,
    )
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheSpec,
        MLAAttentionSpec,
        SlidingWindowSpec,
    )

    def model_config(path: str) -> ModelConfig:
        return ModelConfig(model=path, max_model_len=case["max_model_len"],
                           trust_remote_code=False, skip_tokenizer_init=True)

    target = model_config(case["target"])

    def layer_specs(mc: ModelConfig, tp: int, prefix: str, layers: int,
                    kinds: list[str] | None) -> dict[str, KVCacheSpec]:
        parallel = ParallelConfig(tensor_parallel_size=tp)
        # Attention resolves the KV dtype against vllm_config.model_config: the target's
        dtype = kv_cache_dtype_str_to_dtype(case["kv_cache_dtype"], target)
        block = case["block_size"]
        specs: dict[str, KVCacheSpec] = {}
        for i in range(layers):
            name = f"{prefix}.{i}.attn"
            if mc.use_mla:
                specs[name] = MLAAttentionSpec(
                    block_size=block, num_kv_heads=1, max_tp_shards=1,
                    head_size=mc.get_head_size(), dtype=dtype,
                    cache_dtype_str=case["kv_cache_dtype"])
                continue
            common = {"block_size": block, "num_kv_heads": mc.get_num_kv_heads(parallel),
                      "head_size": mc.get_head_size(), "head_size_v": mc.get_head_size(),
                      "dtype": dtype}
            if kinds is not None and kinds[i] == "sliding_attention":
                specs[name] = SlidingWindowSpec(**common,
                                                sliding_window=mc.get_sliding_window())
            else:
                specs[name] = FullAttentionSpec(**common)
        return specs

    text = target.hf_text_config
    layer_kinds = getattr(text, "layer_types", None)  # LAYER_KINDS
    if target.architecture == "GptOssForCausalLM":
        assert layer_kinds == ["sliding_attention" if i % 2 == 0 else "full_attention"
                               for i in range(text.num_hidden_layers)]
    specs = layer_specs(target, case["tp"], "model.layers", text.num_hidden_layers,
                        layer_kinds)
    draft_layers = 0
    if case.get("draft") == "bundled":
        draft_layers = int(getattr(text, "num_nextn_predict_layers", 0) or 0)
        specs |= layer_specs(target, case["tp"], "mtp.layers", draft_layers, None)
    elif case.get("draft"):
        draft = model_config(case["draft"])
        draft_layers = draft.hf_text_config.num_hidden_layers
        specs |= layer_specs(draft, case["draft_tp"], "draft.layers", draft_layers, None)

    cache_config = CacheConfig(block_size=case["block_size"],
                               cache_dtype=case["kv_cache_dtype"])
    engine_config = types.SimpleNamespace(  # ENGINE_CONFIG
        model_config=target, cache_config=cache_config,
        parallel_config=ParallelConfig(tensor_parallel_size=case["tp"]),
        attention_config=AttentionConfig(), kv_transfer_config=None,
        scheduler_config=types.SimpleNamespace(
            disable_hybrid_kv_cache_manager=case["disable_hybrid_kv_cache_manager"]),
        max_in_flight_tokens=case["max_in_flight_tokens"])
    # FLASH_ATTN and FLASH_ATTN_MLA declare no layout of their own: the default preference
    supported = [layout.name for layout in get_supported_kv_cache_layouts(())]
    layout = resolve_kv_cache_layout(engine_config, [supported], specs.values())
    cache_config.kv_cache_layout = layout.name
    groups = get_kv_cache_groups(engine_config, dict(specs))
    config = get_kv_cache_config_from_groups(engine_config, groups, case["available_bytes"])
    tokens, concurrency = get_kv_cache_capacity(engine_config, config)
    tensor = config.kv_cache_tensors[0]
    return {
        "ok": True,
        "groups": [len(g.layer_names) for g in config.kv_cache_groups],
        "num_blocks": config.num_blocks,
        "bytes_per_block": tensor.size // config.num_blocks,
        "capacity_tokens": tokens,
        "max_concurrency": concurrency,
        "layout": layout.name,
        "dtype_bytes": torch.tensor([], dtype=kv_cache_dtype_str_to_dtype(
            case["kv_cache_dtype"], target)).element_size(),
        "draft_layers": draft_layers,
    }


def main() -> None:
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()  # IN_PROCESS_REGISTRY
    results = []
    for case in json.loads(sys.stdin.read()):
        try:
            results.append(plan(case))
        except Exception as error:  # reported per case to the test
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}",
                            "trace": traceback.format_exc(limit=8)[-3000:]})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
