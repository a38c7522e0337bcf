"""Real checkpoints for tests: config.json, tokenizer files and safetensors shards.

Tensors carry the names and shapes of a Llama/Qwen-style decoder, so parameter counts can
be predicted from the config independently of specpair's code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file


def llama_config(hidden: int = 256, layers: int = 4, heads: int = 4, kv_heads: int = 2,
                 intermediate: int = 512, vocab: int = 300, **extra: Any) -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": hidden, "intermediate_size": intermediate,
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "head_dim": hidden // heads, "vocab_size": vocab,
            "max_position_embeddings": 4096, "torch_dtype": "float16",
            "tie_word_embeddings": False, **extra}


def tensor_shapes(config: dict[str, Any], extra_layers: int = 0) -> dict[str, tuple[int, ...]]:
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    hd = config["head_dim"]
    q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h),
                                          "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for n in range(config["num_hidden_layers"] + extra_layers):
        p = f"model.layers.{n}."
        shapes |= {p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
                   p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
                   p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                   p + "mlp.down_proj.weight": (h, i), p + "input_layernorm.weight": (h,),
                   p + "post_attention_layernorm.weight": (h,)}
    return shapes


TOKENIZER = {"version": "1.0", "added_tokens": [{"id": 0, "content": "<s>", "special": True},
                                                {"id": 1, "content": "</s>", "special": True}],
             "model": {"type": "BPE", "vocab": {f"t{n}": n for n in range(2, 300)},
                       "merges": []}}


def write_checkpoint(folder: Path, config: dict[str, Any], shards: int = 1,
                     extra_layers: int = 0, seed: int = 0) -> dict[str, tuple[int, ...]]:
    """Write a checkpoint; returns the tensor shapes it holds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "tokenizer.json").write_text(json.dumps(TOKENIZER))
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 4096}))
    shapes = tensor_shapes(config, extra_layers)
    names = sorted(shapes)
    rng = np.random.default_rng(seed)
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        file = "model.safetensors" if shards == 1 else \
            f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: rng.standard_normal(shapes[n]).astype(np.float16) for n in part},
                  str(folder / file))
        weight_map |= {n: file for n in part}
    if shards > 1:
        (folder / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": weight_map}))
    return shapes
