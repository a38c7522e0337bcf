"""Model geometries the tests build pairs from: published shapes and a dense parametrised one."""

from __future__ import annotations

from specpair.model.geometry import Geometry, LinearAttention

QWEN3_32B_LIKE = Geometry(
    architecture="Qwen3ForCausalLM", dtype="bfloat16", hidden_size=5120, vocab_size=151936,
    max_position_embeddings=40960, num_hidden_layers=64, attention="mha",
    full_attention_layers=64, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
    v_head_dim=128)


# five dense MHA layers: the layout of SpecForge's DSparkDraftModel, which the KV oracle
# verifies (the release's verified_layouts.yaml); the shapes are Ling-3.0-flash-dspark's
DSPARK_5L = Geometry(
    architecture="DSparkDraftModel", dtype="bfloat16", hidden_size=2560, vocab_size=157184,
    max_position_embeddings=262144, num_hidden_layers=5, attention="mha",
    full_attention_layers=5, num_attention_heads=32, num_key_value_heads=32, head_dim=80,
    v_head_dim=80)


LING = Geometry(
    architecture="BailingMoeV3ForCausalLM", model_type="bailing_hybrid", dtype="bfloat16",
    hidden_size=2560, vocab_size=157184, max_position_embeddings=262144, num_hidden_layers=42,
    attention="mla", full_attention_layers=7,
    linear_attention=LinearAttention(kind="kda", layers=35, num_heads=32, head_dim=128,
                                     conv_kernel=4),
    num_attention_heads=32, num_key_value_heads=32, head_dim=192, v_head_dim=128,
    kv_lora_rank=512, qk_rope_head_dim=64)


def dense(layers: int, kv_heads: int = 8, head_dim: int = 128, heads: int = 32,
          hidden: int = 4096) -> Geometry:
    return Geometry(architecture="Qwen3ForCausalLM", dtype="bfloat16", hidden_size=hidden,
                    vocab_size=151936, max_position_embeddings=40960, num_hidden_layers=layers,
                    attention="mha", full_attention_layers=layers, num_attention_heads=heads,
                    num_key_value_heads=kv_heads, head_dim=head_dim, v_head_dim=head_dim)
