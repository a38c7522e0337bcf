"""The attention geometry of one model, as the KV-cache math needs it.

A `Geometry` is read from a Hugging Face `config.json` (or declared by hand in a lock)
and says how many layers keep per-token KV and in which form: full MHA/GQA, MLA (one
latent per token), sliding window, or linear attention with a per-request state. It also
carries the draft-only facts the co-design checks need (target layer ids, block size,
mask token, verifier).
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    FieldSerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
    model_validator,
)

from specpair.model.common import NonNegativeInt, PositiveInt, Strict
from specpair.model.memo import value_memo


class LinearAttention(Strict):
    """Linear-attention (recurrent) layers: a fixed-size state per request, no per-token KV.

    KDA (Kimi/Ling) uses one head count and head size for q, k and v; Gated DeltaNet
    (Qwen3-Next) has its own `linear_*` key/value head counts and sizes, read into the
    optional key fields (value heads are `num_heads`, value head size `head_dim`).
    """

    kind: Literal["kda", "mamba2", "gdn"]
    layers: PositiveInt
    num_heads: PositiveInt
    head_dim: PositiveInt
    conv_kernel: PositiveInt = Field(description="short-convolution kernel size (K_conv)")
    num_key_heads: PositiveInt | None = Field(
        default=None, description="GDN: linear_num_key_heads (unset: num_heads)")
    key_head_dim: PositiveInt | None = Field(
        default=None, description="GDN: linear_key_head_dim (unset: head_dim)")
    ssm_dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        default=None, description="GDN: the config's mamba_ssm_dtype (the engine's SSM "
                                  "state dtype unless --mamba-ssm-dtype overrides it)")


ExpertFormat = Literal["fp8", "mxfp4", "nvfp4"]
EXPERT_FORMAT_BYTES: dict[str, float] = {
    "fp8": 1.0 + 4 / (128 * 128),  # E4M3 values, one FP32 scale per 128×128 block
    "mxfp4": 0.5 + 1 / 32,         # E2M1 values, one E8M0 scale per 32 (OCP MX spec)
    "nvfp4": 0.5 + 1 / 16,         # E2M1 values, one E4M3 scale per 16 (+ a tensor scale)
}
"""Checkpoint bytes per parameter of each expert format (values and their block scales)."""


class MixtureOfExperts(Strict):
    """Routed experts: what a token reads of them is top-k of `experts` per MoE layer."""

    experts: PositiveInt = Field(description="routed experts per MoE layer")
    active_experts: PositiveInt = Field(description="experts each token is routed to (top-k)")
    expert_params: PositiveInt = Field(description="parameters of one routed expert")
    moe_layers: PositiveInt
    weight_format: ExpertFormat | None = Field(
        default=None, description="the routed experts' weight format as the checkpoint "
        "stores them (config.json quantization_config): fp8, mxfp4 or nvfp4; unset where "
        "the config quantizes nothing, or names a scheme whose expert bytes are not read "
        "(compressed-tensors groups, per-layer mixed precision)")
    unread_quantization: str | None = Field(
        default=None, description="the config's quantization scheme where it stores the "
        "routed experts in a format not read here (compressed-tensors, AWQ, GPTQ, ModelOpt "
        "MIXED_PRECISION, or experts left out of the quantization): their bytes are "
        "unknown, and the step model refuses rather than spread the checkpoint's average")

    @property
    def routed_params(self) -> int:
        return self.experts * self.expert_params * self.moe_layers

    @property
    def bytes_per_param(self) -> float | None:
        """Bytes one routed-expert parameter takes in the checkpoint, scales included;
        None where the format is not known."""
        return None if self.weight_format is None else EXPERT_FORMAT_BYTES[self.weight_format]






LayerKind = Literal["full", "sliding", "chunked", "linear"]


class LayerKV(Strict):
    """One decoder layer's cache as the engines see it: what it keeps per token (full
    attention, a sliding window, a chunked local window) or per request (linear
    attention / Mamba state), and the shape of its per-token KV."""

    kind: LayerKind
    kv_heads: PositiveInt | None = Field(
        default=None, description="total KV heads (MHA/GQA); None for MLA and state layers")
    head_dim: PositiveInt | None = Field(default=None, description="key head size; MLA: "
                                         "the latent width (kv_lora_rank + rope dim)")
    v_head_dim: NonNegativeInt | None = Field(default=None, description="value head size; "
                                              "0 for MLA (one latent per token)")
    window: PositiveInt | None = Field(default=None, description="sliding window, or the "
                                       "attention chunk of chunked local attention")


class LayerRun(Strict):
    """`repeat` consecutive copies of `layers`: how a lock writes a run of identical layers
    (94 full-attention layers) or of a repeating pattern (sliding, full, sliding, …), so
    that a lock's diff shows what changed, not one dict per layer."""

    repeat: Annotated[int, Field(ge=2)]
    layers: Annotated[list[LayerKV], Field(min_length=1)]


def expand_runs(value: Any) -> Any:
    """The layer list with every run written out (a lock's `layers` may hold runs; older
    locks list each layer, which passes through unchanged)."""
    if not isinstance(value, list):
        return value
    out: list[Any] = []
    for item in value:
        if isinstance(item, LayerRun) or (isinstance(item, dict) and "repeat" in item):
            run = item if isinstance(item, LayerRun) else LayerRun.model_validate(item)
            out += list(run.layers) * run.repeat
        else:
            out.append(item)
    return out


def _longest_run(layers: list[LayerKV], start: int) -> tuple[int, int]:
    """(period, copies) of the repetition starting at `start` that covers the most layers,
    the shortest period on a tie; (1, 1) where nothing repeats."""
    best = (1, 1)
    for period in range(1, (len(layers) - start) // 2 + 1):
        block = layers[start:start + period]
        copies = 1
        while layers[start + copies * period:start + (copies + 1) * period] == block:
            copies += 1
        if copies > 1 and period * copies > best[0] * best[1]:
            best = (period, copies)
    return best


def compact_runs(layers: list[LayerKV], exclude_none: bool) -> list[dict[str, Any]]:
    """`layers` as a lock writes them: repetitions as runs, the rest one dict per layer;
    `expand_runs` gives back exactly `layers`."""
    def dump(layer: LayerKV) -> dict[str, Any]:
        return layer.model_dump(mode="json", exclude_none=exclude_none)
    out: list[dict[str, Any]] = []
    at = 0
    while at < len(layers):
        period, copies = _longest_run(layers, at)
        if copies == 1:
            out.append(dump(layers[at]))
        else:
            out.append({"repeat": copies, "layers": [dump(x) for x in layers[at:at + period]]})
        at += period * copies
    return out


@value_memo  # the budgets list a geometry's layers for every candidate of a plan
def _layer_kv(kind: LayerKind, kv_heads: int | None, head_dim: int, v_head_dim: int,
              window: int | None) -> LayerKV:
    if kv_heads is None:  # MLA: one latent, no KV heads (left unset, as it always was)
        return LayerKV(kind=kind, head_dim=head_dim, v_head_dim=v_head_dim, window=window)
    return LayerKV(kind=kind, kv_heads=kv_heads, head_dim=head_dim, v_head_dim=v_head_dim,
                   window=window)


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
    chunked_attention_layers: NonNegativeInt = Field(
        default=0, description="layers of chunked local attention (Llama 4): KV of the "
                               "current attention_chunk_size-token chunk only")
    attention_chunk_size: PositiveInt | None = None
    linear_attention: LinearAttention | None = None
    moe: MixtureOfExperts | None = None
    quantization: str | None = Field(
        default=None, description="config.json quantization_config.quant_method: how the "
                                  "checkpoint is quantized, which each release accepts or "
                                  "refuses by name (`engine_lists.refused_quantization`)")
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
    projector_type: str | None = Field(
        default=None, description="dflash_config.projector_type of a block drafter (dspark: "
                                  "a DSpark head under the DFlash architecture name; domino: "
                                  "a DFlash variant); unset where the config names none, and "
                                  "in locks written before it was read")
    layers: Annotated[list[LayerKV] | None, BeforeValidator(
        expand_runs, json_schema_input_type=list[LayerKV | LayerRun] | None)] = Field(
        default=None, description="each decoder layer's cache, in layer order, as read "
                                  "from the config, a run of repeated layers written once "
                                  "with `repeat`; unset (hand-declared or older locks): "
                                  "the counts above in the order linear, full, sliding, "
                                  "chunked")

    @model_serializer(mode="wrap")
    def _without_unnamed_quantization(self, handler: SerializerFunctionWrapHandler) -> Any:
        """`quantization` only where the config names one, so a geometry read before the
        field existed serialises as it did."""
        data = handler(self)
        if isinstance(data, dict) and data.get("quantization") is None:
            data.pop("quantization", None)
        return data

    @field_serializer("layers", when_used="json")
    def _runs(self, layers: list[LayerKV] | None, info: FieldSerializationInfo
              ) -> list[dict[str, Any]] | None:
        return None if layers is None else compact_runs(layers, info.exclude_none)

    @model_validator(mode="after")
    def _consistent(self) -> Geometry:
        kv_layers = (self.full_attention_layers + self.sliding_window_layers
                     + self.chunked_attention_layers)
        linear = self.linear_attention.layers if self.linear_attention else 0
        if kv_layers + linear != self.num_hidden_layers:
            raise ValueError(
                f"full ({self.full_attention_layers}) + sliding ({self.sliding_window_layers}) "
                f"+ chunked ({self.chunked_attention_layers}) + linear ({linear}) layers "
                f"must add up to num_hidden_layers ({self.num_hidden_layers})")
        if self.chunked_attention_layers and self.attention_chunk_size is None:
            raise ValueError("chunked_attention_layers > 0 needs attention_chunk_size")
        if self.layers is not None and Counter(layer.kind for layer in self.layers) != \
                Counter(layer.kind for layer in self._counted()):
            raise ValueError("layers list other layer kinds than the layer counts")
        if self.layers is not None and self.layers != self.layer_list(derived=True):
            raise ValueError("layers disagree with the layer counts and head geometry "
                             "(every attention layer has the model's one KV shape)")
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

    def _layer(self, kind: LayerKind, window: int | None) -> LayerKV:
        if self.attention == "mla":
            return _layer_kv(kind, None, self.mla_latent_dim, 0, window)
        return _layer_kv(kind, self.num_key_value_heads, self.head_dim, self.v_head_dim,
                         window)

    def __hash__(self) -> int:
        """Of a few scalar fields: equal geometries (`==` compares every field) hash equal,
        which is all a hash must do, and the budgets' memos (`specpair.model.memo`) key on a
        geometry per candidate, where hashing every field and layer cost more than the
        memo saved (pydantic's frozen hash refuses the list fields in any case)."""
        return hash(_HASHED_FIELDS(self.__dict__))

    def layer_list(self, derived: bool = False) -> list[LayerKV]:
        """Every decoder layer's cache in layer order (`layers`, or, for geometries
        declared by counts, the counts in the order linear, full, sliding, chunked).
        With `derived`, the layers the counts give, in the order `layers` has."""
        if self.layers is None:
            return self._counted()
        if not derived:
            return list(self.layers)
        made = {"full": self._layer("full", None),
                "sliding": self._layer("sliding", self.sliding_window),
                "chunked": self._layer("chunked", self.attention_chunk_size),
                "linear": LayerKV(kind="linear")}
        return [made[layer.kind] for layer in self.layers]

    def _counted(self) -> list[LayerKV]:
        # without a layer list, linear layers come first: Qwen3-Next / Qwen3.5 put
        # attention on the last layer of every `full_attention_interval` run
        linear = self.linear_attention.layers if self.linear_attention else 0
        # a kind the model does not have builds no layer (the budgets call this often)
        return (([LayerKV(kind="linear")] * linear if linear else [])
                + ([self._layer("full", None)] * self.full_attention_layers
                   if self.full_attention_layers else [])
                + ([self._layer("sliding", self.sliding_window)] * self.sliding_window_layers
                   if self.sliding_window_layers else [])
                + ([self._layer("chunked", self.attention_chunk_size)]
                   * self.chunked_attention_layers if self.chunked_attention_layers else []))

    def in_layer_order(self, kinds: list[LayerKind]) -> Geometry:
        """This geometry with its `layers` listed in the given order of kinds."""
        made = {layer.kind: layer for layer in self._counted()}
        return Geometry.model_validate(
            {**self.model_dump(), "layers": [made[k].model_dump() for k in kinds]})


_HASHED_FIELDS = operator.itemgetter(
    "architecture", "hidden_size", "num_hidden_layers", "full_attention_layers",
    "sliding_window_layers", "num_key_value_heads", "head_dim")


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
        merged = {**geometry.model_dump(), **updates, "layers": None}
        changed = Geometry.model_validate(merged)
        if geometry.layers is None:
            return changed
        kinds = [layer.kind for layer in geometry.layers]
        if len(kinds) != changed.num_hidden_layers or Counter(kinds) != Counter(
                layer.kind for layer in changed.layer_list()):
            return changed  # the override redraws the layer counts: their order is unknown
        return changed.in_layer_order(kinds)
