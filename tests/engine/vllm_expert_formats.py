"""The bytes vLLM allocates for routed experts in each weight format it loads (run by
tests/engine/test_expert_format_oracle.py), in whichever release `vllm` imports as.

Each case names a format and a real config's quantization section. vLLM's own quantization
config class reads that section (`Fp8Config` / `Mxfp4Config` / `ModelOptNvFp4Config
.from_config`), and the format's own fused-MoE method registers the experts' parameters on
a layer (`create_weights`: the packed weights, their block scales, any per-expert scalars),
as the model loader does before reading the checkpoint into them. The answer is their bytes
per routed-expert parameter (3 · hidden · intermediate per expert).

Stand-ins, because no model is built here: the method instance is a namespace holding the
real quantization config and the few fields `create_weights` reads of its `FusedMoEConfig`
(gated MLP: two shards in w13, no bias) and of its own constructor's choices (the block-FP8
scale name, no per-expert global scale); the tensor-parallel group is one rank (rank 0 of
world size 1: no process group exists), which the weight parameters and the block-shape
check ask for. gpt-oss's BF16 expert biases (about 0.1% of its expert bytes) belong to no
weight format and are outside the table, so none is allocated here.
"""

from __future__ import annotations

import types
from typing import Any


def bytes_per_param(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import torch
    import vllm.distributed.parallel_state as parallel_state
    from vllm.model_executor.layers.quantization import fp8, modelopt, mxfp4

    one_rank = types.SimpleNamespace(world_size=1, rank_in_group=0)
    parallel_state.get_tp_group = lambda: one_rank
    moe = types.SimpleNamespace(w13_num_shards=2, has_bias=False, is_act_and_mul=True)
    out = []
    for case in cases:
        fmt, quant = case["format"], case["quantization_config"]
        if fmt == "fp8":
            cfg = fp8.Fp8Config.from_config(quant)
            method: Any = fp8.Fp8MoEMethod
            self_ = types.SimpleNamespace(
                quant_config=cfg, moe=moe, block_quant=cfg.weight_block_size is not None,
                weight_block_size=cfg.weight_block_size, moe_block_shape=cfg.weight_block_size,
                weight_scale_refine=None, weight_scale_name="weight_scale_inv")
        elif fmt == "mxfp4":
            method = mxfp4.Mxfp4MoEMethod
            self_ = types.SimpleNamespace(quant_config=mxfp4.Mxfp4Config.from_config(quant),
                                          moe=moe)
        elif fmt == "nvfp4":
            method = modelopt.ModelOptNvFp4FusedMoE
            self_ = types.SimpleNamespace(
                quant_config=modelopt.ModelOptNvFp4Config.from_config(quant), moe=moe,
                use_global_sf=False)
        else:
            raise ValueError(f"no vLLM MoE method named for format {fmt!r}")
        experts, hidden, inter = case["experts"], case["hidden"], case["intermediate"]
        layer = torch.nn.Module()
        method.create_weights(self_, layer, num_experts=experts, hidden_size=hidden,
                              intermediate_size_per_partition=inter,
                              params_dtype=torch.bfloat16,
                              weight_loader=lambda *a, **k: None, global_num_experts=experts)
        allocated = sum(p.numel() * p.element_size() for p in layer.parameters())
        out.append({"format": fmt, "bytes_per_param": allocated / (experts * 3 * hidden * inter),
                    "parameters": sorted(name for name, _ in layer.named_parameters())})
    return out
