"""A model's geometry read from its config.json the way the engines read it (through
transformers' config classes, `hf_config`): the layer layout per decoder layer, the MoE
expert format, and the layout keys refused by name because no engine sizes them as read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specpair.model import hf_config
from specpair.model.geometry import (
    ExpertFormat,
    Geometry,
    LayerKind,
    LinearAttention,
    MixtureOfExperts,
)


def unread_quantization(config: Mapping[str, Any]) -> str | None:
    """The config's quantization scheme where `expert_format` cannot read the experts'
    format from it (None: no quantization_config, or one it reads). An unquantized
    checkpoint keeps every weight, experts included, in the config dtype, so the lock's
    average bytes per parameter hold for them; a quantized one whose experts' format is
    not read may hold them in 4 bits beside BF16 attention, or in BF16 beside FP8 linears:
    the average would put the wrong share of the bytes in the experts."""
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping) or expert_format(config) is not None:
        return None
    method = str(quant.get("quant_method") or "unnamed").lower()
    algo = quant.get("quant_algo")
    scheme = f"{method} {algo}" if algo else method
    return f"{scheme}, experts left out" if _experts_excluded(quant) else scheme


def _experts_excluded(quant: Mapping[str, Any]) -> bool:
    """Whether a quantization_config's exclusion lists name the routed experts (shared
    experts are dense MLPs beside the routed ones: a pattern naming only them leaves the
    routed experts quantized)."""
    excluded = [str(m) for key in ("modules_to_not_convert", "ignore", "exclude_modules")
                for m in (quant.get(key) or []) if isinstance(quant.get(key), list)]
    return any("expert" in m and "shared_expert" not in m for m in excluded)


def expert_format(config: Mapping[str, Any]) -> ExpertFormat | None:
    """The routed experts' stored format from a config's `quantization_config`, as the
    engines' quantization configs select it: `quant_method` fp8 (block FP8, DeepSeek,
    Qwen3-FP8, MiniMax) and mxfp4 (gpt-oss) quantize the experts unless
    `modules_to_not_convert` names them; ModelOpt (`quant_method` modelopt, `quant_algo`
    NVFP4) unless its `ignore` list names them. Anything else (compressed-tensors config
    groups, ModelOpt MIXED_PRECISION per-layer lists, AWQ/GPTQ) is None: its expert bytes
    are not read here, and the step model refuses a MoE whose expert bytes it cannot place
    (`step_inputs.unmodelled`) rather than guess them."""
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method") or "").lower()
    if _experts_excluded(quant):
        return None
    if method == "fp8" and quant.get("quant_algo") in (None, "FP8"):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt" and str(quant.get("quant_algo") or "").upper() == "NVFP4":
        return "nvfp4"
    return None


# --------------------------------------------------------------------------- from config.json

_MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim")


class NotModelled(ValueError):
    """A config key that changes the attention or state layout in a way specpair does not
    model: refusing beats budgeting the model as if it were dense."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"not modelled: {key} ({why})")
        self.key = key


# Keys whose presence changes what a layer keeps per token or per request, and which no
# code path below reads. Each one is refused by name instead of being ignored.
UNMODELLED_LAYOUT_KEYS = {
    "hybrid_override_pattern": "Mamba2 hybrid layer pattern (Nemotron-H)",
    "hybrid_layer_pattern": "per-layer sliding/full pattern with its own SWA head geometry "
                            "(MiMo-V2)",
    "index_topk": "DSA sparse-attention indexer cache (DeepSeek-V3.2, GLM-5)",
    "attention_chunk_size": "chunked local attention without chunked_attention layers in "
                            "layer_types",
    "block_configs": "per-block attention and FFN (Nemotron-NAS / DeciLM): KV heads per "
                     "block, blocks without attention",
    "global_head_dim": "full-attention layers with their own head size (Gemma 4)",
    "num_global_key_value_heads": "full-attention layers with their own KV heads (Gemma 4)",
    "attention_k_eq_v": "layers whose keys are their values (Gemma 4)",
    "num_kv_shared_layers": "layers that reuse another layer's KV (Gemma 3n / Gemma 4)",
    "sliding_window_pattern": "Gemma-style sliding pattern without layer_types",
    "attn_type_list": "lightning/softmax attention mix (MiniMax-01)",
    "swa_num_key_value_heads": "sliding layers with their own head geometry",
    "compress_ratios": "compressed-attention pools (DeepSeek-V4)",
    "linear_attn_config": "KDA/full layer lists of Kimi-Linear",
    "attn_layer_period": "Jamba-style attention/Mamba interleave",
    "attn_layer_indices": "attention layers among Mamba layers",
    "layers_block_type": "per-layer block types (Mamba/attention hybrids)",
    "full_attn_idxs": "LFM2 convolution/attention layer split",
    "block_types": "per-layer block types",
}

# a target's window with no layer_types beside layers of another kind (refused by
# `_window_on_every_layer`, README's key table)
EVERY_LAYER_WINDOW = ("a target's sliding window with no layer_types beside linear-attention "
                      "layers (vLLM would give each attention layer the window)")

_LAYER_KINDS: dict[str, LayerKind] = {
    "full_attention": "full", "attention": "full", "sliding_attention": "sliding",
    "chunked_attention": "chunked", "linear_attention": "linear"}


@dataclass(frozen=True)
class _Layout:
    kinds: list[LayerKind]
    window: int | None
    chunk: int | None
    linear: LinearAttention | None


def _layer_layout(base: Mapping[str, Any], layers: int, heads: int, head_dim: int,
                  draft: bool, as_written: bool = False) -> _Layout:
    """Each layer's kind, from whichever layout style the config uses:
    `layer_types`, `full_attention_interval` (every N-th layer is attention, the rest Gated
    DeltaNet) or Bailing's `layer_group_size`; a plain config is all full attention."""
    _refuse_unmodelled_keys(base)
    kinds = _layer_kinds(base, layers)
    if _window_on_every_layer(base, kinds, draft, as_written):
        kinds = ["sliding"] * layers
    chunk = _attention_chunk_size(base, kinds)
    window = _sliding_window(base, kinds)
    linear = _linear_attention(base, kinds, heads, head_dim)
    return _Layout(kinds, window, chunk, linear)


def _refuse_unmodelled_keys(base: Mapping[str, Any]) -> None:
    """Raise NotModelled for the first layout key, or Mamba/SSM state key, that no code
    path here reads."""
    derived_types = isinstance(base.get("layer_types"), list) and bool(base["layer_types"])
    for key, why in UNMODELLED_LAYOUT_KEYS.items():
        if key == "attention_chunk_size" or (key == "sliding_window_pattern" and derived_types):
            continue  # consumed: read with the layer kinds (the pattern through layer_types)
        if base.get(key) not in (None, [], 0, False):
            raise NotModelled(key, why)
    if base.get("model_type") != "bailing_hybrid":
        # mamba_ssm_dtype only sets the dtype of a state read from the linear_* keys
        state_keys = sorted(k for k in base if k.startswith(("mamba_", "ssm_"))
                            and k != "mamba_ssm_dtype" and base[k] not in (None, [], 0, False))
        if state_keys:
            raise NotModelled(state_keys[0], "a Mamba/SSM state layout")


def _layer_kinds(base: Mapping[str, Any], layers: int) -> list[LayerKind]:
    """The kind of each of the `layers` decoder layers."""
    layer_types = base.get("layer_types")
    interval = base.get("full_attention_interval")
    group = base.get("layer_group_size")
    if isinstance(layer_types, list) and layer_types:
        unknown = sorted({str(t) for t in layer_types if t not in _LAYER_KINDS})
        if unknown:
            raise NotModelled("layer_types", f"layer kinds {', '.join(unknown)}")
        if len(layer_types) < layers:
            raise ValueError(f"layer_types lists {len(layer_types)} layers, "
                             f"num_hidden_layers is {layers}")
        kinds = [_LAYER_KINDS[t] for t in layer_types[:layers]]
        if isinstance(interval, int) and interval > 0 and "linear" in kinds and kinds != [
                "full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]:
            # SGLang 0.5.23's own Qwen3-Next / Qwen3.5 config classes place the layers by
            # the interval, transformers' by layer_types: the engines would disagree
            raise NotModelled("layer_types", f"linear/full layers that disagree with "
                              f"full_attention_interval {interval}")
        return kinds
    if isinstance(interval, int) and interval > 0:
        # Qwen3NextConfig.layers_block_type: attention where (i + 1) % interval == 0
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    if base.get("model_type") == "bailing_hybrid" and isinstance(group, int) and group > 0:
        # BailingHybridConfig.layers_block_type: full attention where (l+1) % group == 0
        return ["full" if (i + 1) % group == 0 else "linear" for i in range(layers)]
    return ["full"] * layers


def _attention_chunk_size(base: Mapping[str, Any], kinds: list[LayerKind]) -> int | None:
    """The chunk of the chunked-attention layers; None without such layers (where a chunk
    size alone is refused)."""
    if "chunked" in kinds:
        chunk = base.get("attention_chunk_size")
        if not isinstance(chunk, int) or chunk <= 0:
            raise ValueError("chunked_attention layers need a positive attention_chunk_size")
        return chunk
    if base.get("attention_chunk_size") not in (None, 0):
        raise NotModelled("attention_chunk_size", UNMODELLED_LAYOUT_KEYS["attention_chunk_size"])
    return None


def _window_on_every_layer(base: Mapping[str, Any], kinds: list[LayerKind],
                           draft: bool, as_written: bool) -> bool:
    """Whether a target's attention layers all take its window: a positive
    `sliding_window` and no `layer_types` (vLLM's `EngineArgs.create_engine_config` sets
    `CacheConfig.sliding_window` from it, and each `Attention` without a window of its own
    takes that one; SGLang keeps a full pool for an architecture that is not hybrid-SWA,
    which its budget reads from the release's lists). Refused where the other layers are
    not all full attention, and in a config no transformers class read (`as_written`):
    whether the checkpoint's own class keeps the window (Qwen2-style classes drop it where
    `use_sliding_window` is false) is not known. A draft's own window is never read: vLLM
    builds the draft's layers with the target's cache config, SGLang sizes the draft's
    pool as full."""
    window = base.get("sliding_window")
    layer_types = base.get("layer_types")
    if draft or not window or (isinstance(layer_types, list) and layer_types):
        return False
    if not (isinstance(window, int) and window > 0 and all(k == "full" for k in kinds)):
        raise NotModelled("sliding_window", EVERY_LAYER_WINDOW)
    if as_written:
        raise NotModelled("sliding_window", "a window and no layer_types in a config no "
                                            "transformers class reads: whether its own "
                                            "class keeps the window is not known")
    return True


def _sliding_window(base: Mapping[str, Any], kinds: list[LayerKind]) -> int | None:
    """The window of the sliding layers; None without such layers (a window with no
    `layer_types` has made them so, or been refused, in `_window_on_every_layer`)."""
    if kinds.count("sliding"):
        window = base.get("sliding_window")
        if not isinstance(window, int) or window <= 0:
            raise ValueError("sliding_attention layers need a positive sliding_window")
        return window
    return None


def _linear_attention(base: Mapping[str, Any], kinds: list[LayerKind], heads: int,
                      head_dim: int) -> LinearAttention | None:
    """The state geometry of the linear-attention layers: Bailing's KDA or Mamba2 from
    the attention heads, Gated DeltaNet from the linear_* keys; None without such layers."""
    linear_count = kinds.count("linear")
    if linear_count and base.get("model_type") == "bailing_hybrid":
        kind = "kda" if base.get("short_conv_kernel_size") is not None else "mamba2"
        return LinearAttention(kind=kind, layers=linear_count, num_heads=heads,
                               head_dim=head_dim,
                               conv_kernel=int(base.get("short_conv_kernel_size") or 4))
    if linear_count:
        # Gated DeltaNet: the state is sized from the linear_* keys, never the attention heads
        needed = ("linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim",
                  "linear_value_head_dim", "linear_conv_kernel_dim")
        missing = [k for k in needed if not isinstance(base.get(k), int)]
        if missing:
            raise NotModelled("layer_types", "linear_attention layers without "
                              + ", ".join(missing))
        return LinearAttention(
            kind="gdn", layers=linear_count, num_heads=base["linear_num_value_heads"],
            head_dim=base["linear_value_head_dim"],
            conv_kernel=base["linear_conv_kernel_dim"],
            num_key_heads=base["linear_num_key_heads"],
            key_head_dim=base["linear_key_head_dim"],
            ssm_dtype=base.get("mamba_ssm_dtype"))
    return None


def _first(config: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def from_hf_config(config: dict[str, Any],
                   classes: hf_config.EngineClasses = hf_config.NO_ENGINE_CLASSES,
                   as_draft: bool = False) -> Geometry:
    """Derive the geometry from a config.json as the engines read it (`classes`: how the
    supported releases' own config registries read model types, `hf_config.EngineClass`).

    `as_draft`: the config is a draft's, whose own sliding window the engines never read.

    Head counts follow SGLang's `get_total_num_kv_heads` order; head_dim is the config's
    `head_dim` when present (Qwen3-32B: 128, not 5120/64 = 80), else hidden/heads.
    Draft blocks (`dflash_config`, `dspark_*`, `speculators_config`) are read in the
    engines' lookup order (sglang 0.5.23: `srt/speculative/dflash_utils.py::
    parse_dflash_draft_config`, `srt/speculative/dspark_components/dspark_config.py::
    parse_dspark_draft_config`).
    """
    # through transformers' class for the model type (defaults and derived fields as the
    # engines see them); text_config (multimodal wrappers) and transformer_layer_config
    # (speculators format) hold the decoder geometry; their keys win over the wrapper's
    decoder = hf_config.read(config, classes)
    base = decoder.merged
    _refuse_missing_defaults(decoder)
    hidden = int(base["hidden_size"])
    heads = int(base["num_attention_heads"])
    kv_heads = int(_first(base, "n_head_kv", "num_kv_heads", "num_key_value_heads",
                          "multi_query_group_num", "num_attention_groups") or heads)
    head_dim = int(base.get("head_dim") or hidden // heads)
    layers = int(base["num_hidden_layers"])
    architecture = (config.get("architectures") or ["unknown"])[0]

    layout = _layer_layout(base, layers, heads, head_dim, as_draft,
                           as_written=decoder.config_class is None)
    _refuse_engine_class_defaults(decoder, classes)

    is_mla = all(base.get(k) is not None for k in _MLA_KEYS)
    moe = _mixture_of_experts(config, base, hidden, layers)
    draft = _draft_block(config)
    quant = config.get("quantization_config") or base.get("quantization_config")
    return Geometry(
        architecture=architecture,
        model_type=base.get("model_type"),
        quantization=str(quant.get("quant_method") or "").lower() or None
        if isinstance(quant, dict) else None,
        # a torch.dtype where torch is installed (the engines' venv), a name elsewhere
        dtype=str(base.get("torch_dtype") or base.get("dtype") or "bfloat16"
                  ).removeprefix("torch."),
        hidden_size=hidden,
        vocab_size=int(base["vocab_size"]),
        max_position_embeddings=int(base["max_position_embeddings"]),
        num_hidden_layers=layers,
        attention="mla" if is_mla else "mha",
        full_attention_layers=layout.kinds.count("full"),
        sliding_window_layers=layout.kinds.count("sliding"),
        sliding_window=layout.window,
        chunked_attention_layers=layout.kinds.count("chunked"),
        attention_chunk_size=layout.chunk,
        linear_attention=layout.linear,
        moe=moe,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=int(base.get("qk_nope_head_dim", 0) + base.get("qk_rope_head_dim", 0))
        if is_mla else head_dim,
        v_head_dim=int(base.get("v_head_dim") or head_dim),
        kv_lora_rank=int(base["kv_lora_rank"]) if is_mla else None,
        qk_rope_head_dim=int(base["qk_rope_head_dim"]) if is_mla else None,
        # as the config says: an engine's draft mode may supply a count the config leaves
        # out (EngineRelease.draft_mode, applied where the bundled draft is built)
        num_nextn_predict_layers=int(base.get("num_nextn_predict_layers") or 0),
        target_layer_ids=[int(i) for i in draft.target_ids] if draft.target_ids else None,
        num_target_layers=int(draft.num_target) if draft.num_target else None,
        block_size=int(draft.block_size) if draft.block_size else None,
        mask_token_id=int(draft.mask) if draft.mask is not None else None,
        draft_vocab_size=int(config["draft_vocab_size"])
        if config.get("draft_vocab_size") else None,
        verifier=draft.verifier,
        projector_type=str(draft.projector) if draft.projector else None,
    ).in_layer_order(layout.kinds)


def _refuse_missing_defaults(decoder: hf_config.DecoderConfig) -> None:
    """Without a transformers class for the model type nothing supplies the defaults the
    engines would take from it, so the file itself must hold them."""
    base = decoder.merged
    if decoder.config_class is None:
        missing = [k for k in ("vocab_size", "max_position_embeddings") if base.get(k) is None]
        if missing:
            raise ValueError(
                f"{', '.join(missing)} not in config.json, and transformers has no config "
                f"class for model_type {base.get('model_type')!r} to supply a default "
                "(custom config code is not run): declare the geometry in the lock")


def _refuse_engine_class_defaults(decoder: hf_config.DecoderConfig,
                                  classes: hf_config.EngineClasses) -> None:
    """Where an engine release reads the model type with its own config class, a layout
    fact that only transformers' default supplied may not be the engine's; where the
    releases read it in ways that cannot be one, nothing is."""
    base = decoder.merged
    model_type = base.get("model_type")
    entry = classes.get(model_type) if isinstance(model_type, str) else None
    if entry is None:
        return
    if entry.conflict:
        raise NotModelled("model_type", f"{model_type}: {entry.conflict}")
    if not entry.readers:
        return
    for key in hf_config.LAYOUT_FACTS:
        if key not in decoder.written and base.get(key) is not None:
            raise NotModelled(key, f"not in config.json; {', '.join(entry.readers)} read "
                              f"model_type {model_type} with a config class of its own, "
                              "whose default need not be transformers'")


def _mixture_of_experts(config: Mapping[str, Any], base: Mapping[str, Any], hidden: int,
                        layers: int) -> MixtureOfExperts | None:
    """The routed experts, where the config names their count, top-k and width."""
    experts = _first(base, "n_routed_experts", "num_experts", "num_local_experts")
    top_k = _first(base, "num_experts_per_tok", "num_experts_per_token", "experts_per_token",
                   "moe_topk")
    # Mixtral and gpt-oss have no dense MLP: their expert width is `intermediate_size`
    expert_width = _first(base, "moe_intermediate_size", "expert_intermediate_size",
                          "intermediate_size")
    if not (experts and top_k and expert_width):
        return None
    quantized = config if "quantization_config" in config else base
    dense_first = int(base.get("first_k_dense_replace") or 0)
    return MixtureOfExperts(experts=int(experts), active_experts=int(top_k),
                            expert_params=3 * hidden * int(expert_width),  # gate, up, down
                            moe_layers=max(1, layers - dense_first),
                            weight_format=expert_format(quantized),
                            unread_quantization=unread_quantization(quantized))


@dataclass(frozen=True)
class _DraftBlock:
    """A draft's keys as its config spells them (converted where Geometry is built)."""
    block_size: Any
    target_ids: Any
    mask: Any
    num_target: Any
    verifier: Any
    projector: Any


def _draft_block(config: Mapping[str, Any]) -> _DraftBlock:
    """The draft keys in the engines' lookup order: `dspark_*`, then `dflash_config`, then
    the top level (and EAGLE's `eagle_config` for the target layers); the verifier that
    `speculators_config` names."""
    dflash: dict[str, Any] = config["dflash_config"] if isinstance(
        config.get("dflash_config"), dict) else {}
    speculators = config.get("speculators_config") or {}
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
    # sglang 0.5.23 reads it the same way (srt/speculative/dflash_utils.py::
    # parse_dflash_draft_config: dflash_config first, then the top level)
    projector = dflash.get("projector_type", config.get("projector_type"))
    return _DraftBlock(block_size, target_ids, mask, num_target, verifier, projector)
