"""What an engine release decides by architecture name, read from the release's own code:
each release's `engine_lists.yaml`, written by tools/engine_lists.py from the release and
held equal to it by tests/engine/test_copied_decisions.py (a list copied by hand lacked
architectures the engine had, issue 54).

SGLang (srt/configs/model_config.py, srt/arg_groups/overrides.py at the release):
- `hybrid_swa`: `is_hybrid_swa_model`'s architectures, which get a full and a SWA pool,
  each with how `get_hybrid_layer_ids` places its SWA layers (`layer_types`,
  `every_fourth_full`, or `own`, a rule specpair does not read);
- `extra_buffer`: `_MAMBA_EXTRA_BUFFER_ARCHS` (the `auto` mamba radix cache strategy);
- `built_in_mtp_layers`: `ModelConfig._config_draft_model`'s `num_nextn_predict_layers`
  for a config that names none (`unset`) and for one that names 3 (`configured_3`);
- `quantization_methods`: the checkpoint quantization methods its registry accepts on a
  CUDA host (srt/layers/quantization/__init__.py), and the names its classes'
  `override_quantization_method` test for (anything else: "Unknown quantization method").

vLLM (vllm/model_executor/models/config.py, vllm/config/speculative.py at the release):
- `ssm_dtype_from_config`: the architectures whose MODELS_CONFIG_MAP hook
  (`verify_and_update_config`, Qwen3_5ForConditionalGenerationConfig and its subclasses)
  makes the config's `mamba_ssm_dtype` the SSM state dtype; elsewhere it follows the model.
- `deprecated_quantization`: DEPRECATED_QUANTIZATION_METHODS
  (model_executor/layers/quantization/__init__.py), which ModelConfig refuses without
  --allow-deprecated-quantization (a flag specpair does not pass);
- `mla_model_types`: the model types `is_deepseek_mla`
  (transformers_utils/model_arch_config_convertor.py) serves with its MLA cache, one
  latent per token, where the text config has a kv_lora_rank; any other model type keeps
  the K and V its model class builds (MiniCPM3: full K and V for every head), which
  specpair's port does not read from the config (`refused_attention`);
- `hybrid_manager_off_for_chunked`: the methods (as the release spells them) with which
  VllmConfig.__post_init__ turns the hybrid KV cache manager off for a model with chunked
  local attention (its predicate beside attention_chunk_size: SpeculativeConfig.use_eagle
  in 0.32.0 and 0.33.0, the method's SpeculatorConfig.uses_target_hidden_states in
  0.34.0): every chunked layer then keeps the full context;
- `built_in_mtp_layers` (by architecture) and `built_in_mtp_layers_by_model_type`: the
  layers of the MTP draft `SpeculativeConfig.hf_config_override` selects, as that MTP
  model class sets `num_mtp_layers` (Qwen3NextMTP: one where the config names none).

Both: `speculative_methods`, every method the release accepts as it spells it (SGLang:
`SpeculativeAlgorithm`'s names and the aliases its server arguments resolve,
srt/speculative/spec_info.py and spec_registry.py; vLLM: the `SpeculativeMethod` literals,
vllm/config/speculative.py), with vLLM's `mtp_aliases`, the MTP model types
`SpeculativeConfig` reads as `mtp`: a runbook naming a method specpair does not model is
refused with the releases that accept it (`specpair.load.near_values`); `config_classes`,
each model type of the release's config registry (SGLang
srt/utils/hf_transformers/common.py `_CONFIG_REGISTRY`, vLLM
vllm/transformers_utils/config.py `_CONFIG_REGISTRY`) with the transformers model type
its class is or aliases (`reads_as`; None: a class of the release's own) and an own
class's renamed keys (`attribute_map`). `config_classes(labels)` merges them for the
lock, which reads configs once for every release (`specpair.model.hf_config.EngineClass`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from specpair.facts.release_data import release_text
from specpair.facts.yaml_data import safe_load
from specpair.model.geometry import Geometry
from specpair.model.hf_config import EngineClass

FILE = "engine_lists.yaml"


@dataclass(frozen=True)
class BuiltInLayers:
    """The draft-mode layer count the engine sets for an architecture."""

    unset: int | None
    """the count where the config names none (None: left unset)"""
    configured_3: int | None
    """the count where the config names 3 (3: the engine keeps the config's)"""

    def layers(self, configured: int) -> int | None:
        """The count the engine uses for a config naming `configured` (0: none)."""
        if not configured:
            return self.unset
        return configured if self.configured_3 == 3 else self.configured_3


@dataclass(frozen=True)
class EngineLists:
    hybrid_swa: Mapping[str, str] = field(default_factory=dict)
    extra_buffer: frozenset[str] = frozenset()
    built_in_mtp_layers: Mapping[str, BuiltInLayers] = field(default_factory=dict)
    built_in_mtp_layers_by_model_type: Mapping[str, BuiltInLayers] = field(
        default_factory=dict)
    ssm_dtype_from_config: frozenset[str] = frozenset()
    config_classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    quantization_methods: frozenset[str] = frozenset()
    deprecated_quantization: frozenset[str] = frozenset()
    hybrid_manager_off_for_chunked: frozenset[str] = frozenset()
    mla_model_types: frozenset[str] | None = None
    """None: the release decides MLA otherwise (SGLang, by architecture)"""
    speculative_methods: frozenset[str] = frozenset()
    """every method the release accepts, as it spells it"""
    mtp_aliases: frozenset[str] = frozenset()
    """methods the release reads as its MTP method (vLLM's MTP model types)"""


def raw(engine: str) -> dict[str, Any]:
    """The release's file as written (the test compares it with the release)."""
    text = release_text(engine, FILE)
    return dict(safe_load(text) or {}) if text is not None else {}


@cache
def of(engine: str) -> EngineLists:
    """The lists of release `engine` ("sglang 0.5.23"); empty where it has none."""
    data = raw(engine)
    return EngineLists(
        hybrid_swa=dict(data.get("hybrid_swa") or {}),
        extra_buffer=frozenset(data.get("extra_buffer") or ()),
        built_in_mtp_layers=_layers(data.get("built_in_mtp_layers")),
        built_in_mtp_layers_by_model_type=_layers(
            data.get("built_in_mtp_layers_by_model_type")),
        ssm_dtype_from_config=frozenset(data.get("ssm_dtype_from_config") or ()),
        config_classes=dict(data.get("config_classes") or {}),
        quantization_methods=frozenset(data.get("quantization_methods") or ()),
        deprecated_quantization=frozenset(data.get("deprecated_quantization") or ()),
        hybrid_manager_off_for_chunked=frozenset(
            data.get("hybrid_manager_off_for_chunked") or ()),
        mla_model_types=frozenset(data["mla_model_types"]) if "mla_model_types" in data
        else None,
        speculative_methods=frozenset(data.get("speculative_methods") or ()),
        mtp_aliases=frozenset(data.get("mtp_aliases") or ()))


def _layers(entries: Mapping[str, Any] | None) -> dict[str, BuiltInLayers]:
    return {name: BuiltInLayers(entry["unset"], entry["configured_3"])
            for name, entry in (entries or {}).items()}


@cache
def config_classes(labels: tuple[str, ...]) -> dict[str, EngineClass]:
    """How releases `labels` read each model type of their config registries, as one
    reading: an alias they agree on, the renamed keys of their own classes, and which
    release reads it with a class of its own; a conflict where they differ."""
    found: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for label in labels:
        for model_type, entry in of(label).config_classes.items():
            found.setdefault(model_type, []).append((label, entry))
    return {model_type: _merged(entries) for model_type, entries in found.items()}


def _merged(entries: list[tuple[str, Mapping[str, Any]]]) -> EngineClass:
    aliases = sorted({str(e["reads_as"]) for _, e in entries if e.get("reads_as")})
    own = [(label, e) for label, e in entries if not e.get("reads_as")]
    renamed: dict[str, str] = {}
    conflicts = []
    for label, entry in own:
        for attribute, key in (entry.get("renamed") or {}).items():
            if renamed.setdefault(attribute, key) != key:
                conflicts.append(f"{label} {entry['class']} reads {attribute} from {key}, "
                                 f"another release from {renamed[attribute]}")
    if len(aliases) > 1:
        conflicts.append(f"the releases read it as {' and '.join(aliases)}")
    return EngineClass(reads_as=aliases[0] if len(aliases) == 1 else None, renamed=renamed,
                       readers=tuple(f"{label} {entry['class']}" for label, entry in own),
                       conflict="; ".join(conflicts) or None)


def refused_quantization(engine: str, geometry: Geometry) -> str | None:
    """Why release `engine` refuses the checkpoint's own quantization (config.json
    `quantization_config.quant_method`), in the engine's words; None where it accepts it,
    the config names none, or the release's lists say nothing."""
    method = geometry.quantization
    if not method:
        return None
    lists = of(engine)
    if method in lists.deprecated_quantization:
        return (f"the checkpoint's quantization method {method} is deprecated in {engine}: "
                "\"The quantization method %s is deprecated and will be removed in future "
                "versions of vLLM. To bypass, set `--allow-deprecated-quantization`.\" "
                "(config/model.py, which specpair does not pass)")
    if lists.quantization_methods and method not in lists.quantization_methods:
        return (f"{engine} has no quantization method {method} for the checkpoint: \"Unknown "
                f"quantization method: {method}\" (srt/configs/model_config.py)")
    return None


def refused_attention(engine: str, geometry: Geometry) -> str | None:
    """Why release `engine` does not size the config's attention as specpair reads it:
    an MLA config (kv_lora_rank) of a model type the release does not serve with its MLA
    cache; None where it does, or where the release's lists say nothing."""
    allowed = of(engine).mla_model_types
    if geometry.attention != "mla" or allowed is None or geometry.model_type in allowed:
        return None
    named = geometry.model_type or "(none recorded in the lock: re-lock to read it)"
    return (f"{engine} does not serve model type {named} with its MLA cache "
            "(only the model types of ModelArchConfigConvertorBase.is_deepseek_mla, "
            "transformers_utils/model_arch_config_convertor.py, keep one latent per token): "
            "its model class keeps K and V of its own shape, which specpair does not read "
            "from the config")
