"""The attention geometry of one model, as the KV-cache math needs it.

A `Geometry` is read from a Hugging Face `config.json` (or declared by hand in a lock)
and says how many layers keep per-token KV and in which form: full MHA/GQA, MLA (one
latent per token), sliding window, or linear attention with a per-request state. It also
carries the draft-only facts the co-design checks need (target layer ids, block size,
mask token, verifier).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from specpair.schema.common import NonNegativeInt, PositiveInt, Strict


class LinearAttention(Strict):
    """Linear-attention (recurrent) layers: a fixed-size state per request, no per-token KV."""

    kind: Literal["kda", "mamba2", "gdn"]
    layers: PositiveInt
    num_heads: PositiveInt
    head_dim: PositiveInt
    conv_kernel: PositiveInt = Field(description="short-convolution kernel size (K_conv)")


class MixtureOfExperts(Strict):
    """Routed experts: what a token reads of them is top-k of `experts` per MoE layer."""

    experts: PositiveInt = Field(description="routed experts per MoE layer")
    active_experts: PositiveInt = Field(description="experts each token is routed to (top-k)")
    expert_params: PositiveInt = Field(description="parameters of one routed expert")
    moe_layers: PositiveInt

    @property
    def routed_params(self) -> int:
        return self.experts * self.expert_params * self.moe_layers


class Geometry(Strict):
    architecture: str
    model_type: str | None = None
    dtype: str = Field(description="weight dtype of the checkpoint (config torch_dtype)")
    hidden_size: PositiveInt
    vocab_size: PositiveInt
    max_position_embeddings: PositiveInt
    num_hidden_layers: PositiveInt
    attention: Literal["mha", "mla"] = Field(
        description="form of the layers that keep per-token KV: mha (also GQA/MQA) or mla")
    full_attention_layers: NonNegativeInt = Field(
        description="layers that keep KV for every token of the context")
    sliding_window_layers: NonNegativeInt = 0
    sliding_window: PositiveInt | None = None
    linear_attention: LinearAttention | None = None
    moe: MixtureOfExperts | None = None
    num_attention_heads: PositiveInt
    num_key_value_heads: PositiveInt
    head_dim: PositiveInt
    v_head_dim: PositiveInt
    kv_lora_rank: PositiveInt | None = None
    qk_rope_head_dim: NonNegativeInt | None = None
    num_nextn_predict_layers: NonNegativeInt = 0
    # facts that only drafts carry
    target_layer_ids: list[NonNegativeInt] | None = None
    num_target_layers: PositiveInt | None = None
    block_size: PositiveInt | None = None
    mask_token_id: NonNegativeInt | None = None
    draft_vocab_size: PositiveInt | None = None
    verifier: str | None = Field(default=None,
                                 description="target named by speculators_config.verifier")

    @model_validator(mode="after")
    def _consistent(self) -> Geometry:
        kv_layers = self.full_attention_layers + self.sliding_window_layers
        linear = self.linear_attention.layers if self.linear_attention else 0
        if kv_layers + linear != self.num_hidden_layers:
            raise ValueError(
                f"full ({self.full_attention_layers}) + sliding ({self.sliding_window_layers}) "
                f"+ linear ({linear}) layers must add up to num_hidden_layers "
                f"({self.num_hidden_layers})")
        if self.attention == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("MLA geometry needs kv_lora_rank and qk_rope_head_dim")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers > 0 needs sliding_window")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads ({self.num_attention_heads}) is not a multiple "
                             f"of num_key_value_heads ({self.num_key_value_heads})")
        return self

    @property
    def mla_latent_dim(self) -> int:
        return (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0)


class GeometryOverride(Strict):
    """Values a runbook may pin over what the lock resolved (e.g. a config key the hub
    copy gets wrong). Every override is reported as `declared in runbook`."""

    dtype: str | None = None
    hidden_size: PositiveInt | None = None
    vocab_size: PositiveInt | None = None
    max_position_embeddings: PositiveInt | None = None
    num_hidden_layers: PositiveInt | None = None
    full_attention_layers: NonNegativeInt | None = None
    num_attention_heads: PositiveInt | None = None
    num_key_value_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None
    kv_lora_rank: PositiveInt | None = None
    qk_rope_head_dim: NonNegativeInt | None = None
    target_layer_ids: list[NonNegativeInt] | None = None
    block_size: PositiveInt | None = None
    mask_token_id: NonNegativeInt | None = None

    def apply(self, geometry: Geometry) -> Geometry:
        updates = self.model_dump(exclude_none=True)
        if not updates:
            return geometry
        merged = {**geometry.model_dump(), **updates}
        return Geometry.model_validate(merged)


# --------------------------------------------------------------------------- from config.json

_MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim")


def _first(config: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def from_hf_config(config: dict[str, Any]) -> Geometry:
    """Derive the geometry from a config.json as the engines read it.

    Head counts follow SGLang's `get_total_num_kv_heads` order; head_dim is the config's
    `head_dim` when present (Qwen3-32B: 128, not 5120/64 = 80), else hidden/heads.
    Draft blocks (`dflash_config`, `dspark_*`, `speculators_config`) are read in the
    engines' lookup order (ENGINE_NOTES_SGLANG §3).
    """
    # text_config (multimodal wrappers) and transformer_layer_config (speculators format)
    # hold the decoder geometry; their keys win over the wrapper's
    nested: dict[str, Any] = next((config[k] for k in ("text_config", "transformer_layer_config")
                   if isinstance(config.get(k), dict)), {})
    base = {**config, **nested}
    hidden = int(base["hidden_size"])
    heads = int(base["num_attention_heads"])
    kv_heads = int(_first(base, "n_head_kv", "num_kv_heads", "num_key_value_heads",
                          "multi_query_group_num", "num_attention_groups") or heads)
    head_dim = int(base.get("head_dim") or hidden // heads)
    layers = int(base["num_hidden_layers"])
    architecture = (config.get("architectures") or ["unknown"])[0]
    dflash: dict[str, Any] = config["dflash_config"] if isinstance(
        config.get("dflash_config"), dict) else {}
    speculators = config.get("speculators_config") or {}

    linear: LinearAttention | None = None
    full_layers, sliding_layers, window = layers, 0, None
    layer_types = base.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        sliding_layers = sum(1 for t in layer_types if t == "sliding_attention")
        full_layers = sum(1 for t in layer_types if t == "full_attention")
        window = base.get("sliding_window") if sliding_layers else None
        linear_count = len(layer_types) - full_layers - sliding_layers
        if linear_count:
            linear = LinearAttention(kind="gdn", layers=linear_count, num_heads=heads,
                                     head_dim=head_dim,
                                     conv_kernel=int(base.get("linear_conv_kernel_dim") or 4))
    group = base.get("layer_group_size")
    if base.get("model_type") == "bailing_hybrid" and isinstance(group, int) and group > 0:
        # BailingHybridConfig.layers_block_type: full attention where (l+1) % group == 0
        full_layers = sum(1 for i in range(layers) if (i + 1) % group == 0)
        kind = "kda" if base.get("short_conv_kernel_size") is not None else "mamba2"
        linear = LinearAttention(kind=kind, layers=layers - full_layers, num_heads=heads,
                                 head_dim=head_dim,
                                 conv_kernel=int(base.get("short_conv_kernel_size") or 4))
        sliding_layers = 0

    is_mla = all(base.get(k) is not None for k in _MLA_KEYS)
    moe = None
    experts = _first(base, "n_routed_experts", "num_experts", "num_local_experts")
    top_k = _first(base, "num_experts_per_tok", "num_experts_per_token", "experts_per_token",
                   "moe_topk")
    # Mixtral and gpt-oss have no dense MLP: their expert width is `intermediate_size`
    expert_width = _first(base, "moe_intermediate_size", "expert_intermediate_size",
                          "intermediate_size")
    if experts and top_k and expert_width:
        dense_first = int(base.get("first_k_dense_replace") or 0)
        moe = MixtureOfExperts(experts=int(experts), active_experts=int(top_k),
                               expert_params=3 * hidden * int(expert_width),  # gate, up, down
                               moe_layers=max(1, layers - dense_first))
    block_size = _first({**dflash, **config}, "dspark_block_size") or _first(
        dflash, "block_size") or config.get("block_size")
    target_ids = config.get("dspark_target_layer_ids") or dflash.get(
        "target_layer_ids") or config.get("target_layer_ids")
    if target_ids is None and isinstance(config.get("eagle_config"), dict):
        target_ids = config["eagle_config"].get("eagle_aux_hidden_state_layer_ids")
    mask = _first(config, "dspark_noise_token_id")
    if mask is None:
        mask = _first(dflash, "mask_token_id")
    if mask is None:
        mask = config.get("mask_token_id")
    verifier = None
    if isinstance(speculators.get("verifier"), dict):
        verifier = speculators["verifier"].get("name_or_path")
    num_target = dflash.get("num_target_layers") or config.get("num_target_layers")
    return Geometry(
        architecture=architecture,
        model_type=base.get("model_type"),
        dtype=str(base.get("torch_dtype") or base.get("dtype") or "bfloat16"),
        hidden_size=hidden,
        vocab_size=int(base["vocab_size"]),
        max_position_embeddings=int(base.get("max_position_embeddings") or 2048),
        num_hidden_layers=layers,
        attention="mla" if is_mla else "mha",
        full_attention_layers=full_layers,
        sliding_window_layers=sliding_layers,
        sliding_window=window,
        linear_attention=linear,
        moe=moe,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=int(base.get("qk_nope_head_dim", 0) + base.get("qk_rope_head_dim", 0))
        if is_mla else head_dim,
        v_head_dim=int(base.get("v_head_dim") or head_dim),
        kv_lora_rank=int(base["kv_lora_rank"]) if is_mla else None,
        qk_rope_head_dim=int(base["qk_rope_head_dim"]) if is_mla else None,
        num_nextn_predict_layers=int(base.get("num_nextn_predict_layers") or 0),
        target_layer_ids=[int(i) for i in target_ids] if target_ids else None,
        num_target_layers=int(num_target) if num_target else None,
        block_size=int(block_size) if block_size else None,
        mask_token_id=int(mask) if mask is not None else None,
        draft_vocab_size=int(config["draft_vocab_size"])
        if config.get("draft_vocab_size") else None,
        verifier=verifier,
    )
