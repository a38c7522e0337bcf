"""config.json read the way the engines read it: through transformers' own config class.

SGLang 0.5.23 and vLLM 0.33.0 never look at a config.json's raw keys: they instantiate
the transformers config class of its `model_type` (AutoConfig) and read attributes of that
object, so a key the file leaves out has the class's default (Gemma 3: `vocab_size`
262208, `max_position_embeddings` 131072), derived fields exist even when the file lacks
them (`layer_types` from a sliding pattern, Qwen2's window dropped when
`use_sliding_window` is false), and renamed keys are read under their new name. A
multimodal wrapper's decoder is its `get_text_config()`.

Both engines pin the same transformers release (sglang 0.5.23 requires
`transformers==5.19.0`, vllm 0.33.0 `>=5.16.1,<5.21.0`); specpair pins it too, so the
defaults here are the ones the engine sees.

Nothing here runs a checkpoint's own code (`auto_map`, trust_remote_code): a model type
transformers has no class for is read as written, and `DecoderConfig.config_class` is
None so that the lock and every output can say the facts were not filled in by the class.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

TRANSFORMERS_VERSION = "5.19.0"

# Model types both engines read with a transformers class registered under another name
# (vllm transformers_utils/config.py::_CONFIG_REGISTRY, sglang
# utils/hf_transformers/common.py: `kimi_k2` and `deepseek_v32` are DeepseekV3Config).
ENGINE_ALIASES = {"kimi_k2": "deepseek_v3", "deepseek_v32": "deepseek_v3"}

# Model types SGLang 0.5.23 reads with config classes of its own
# (utils/hf_transformers/common.py::_CONFIG_REGISTRY), not transformers': their defaults
# may differ, so a layout fact the file leaves out is not known to be the engines' one.
ENGINE_OWN_CLASSES = frozenset({
    "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
    "kimi_linear", "nemotron_h", "bailing_hybrid", "falcon_h1", "granitemoehybrid"})
# the facts a layout is computed from, which such a file must spell out
LAYOUT_FACTS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "head_dim", "hidden_size", "linear_num_value_heads", "linear_num_key_heads",
                "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim")

# Draft formats whose decoder is a nested config of an ordinary model type (vLLM's
# SpeculatorsConfig reads `transformer_layer_config` through its own model_type).
NESTED_DECODER_KEYS = ("transformer_layer_config",)


class ConfigView(Mapping[str, Any]):
    """A config object read like a dict, by attribute as the engines read it: properties
    of the class (NemotronHConfig.num_hidden_layers, layers_block_type) are keys too."""

    def __init__(self, instance: Any) -> None:
        self._instance = instance
        names = list(instance.to_dict())
        names += [n for klass in type(instance).__mro__ for n, v in vars(klass).items()
                  if isinstance(v, property) and not n.startswith("_")]
        self._names = [n for n in dict.fromkeys(names) if self._has(n)]

    def _has(self, name: str) -> bool:
        try:
            getattr(self._instance, name)
        except Exception:  # a property that raises is a key the config does not have
            return False
        return True

    def __getitem__(self, key: str) -> Any:
        if key not in self._names:
            raise KeyError(key)
        value = getattr(self._instance, key)
        return value.to_dict() if hasattr(value, "to_dict") and hasattr(value, "model_type") \
            else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class _Chain(Mapping[str, Any]):
    """Several mappings; the first that has a key answers (the decoder before the
    wrapper, the config class before the file)."""

    def __init__(self, *maps: Mapping[str, Any]) -> None:
        self._maps = maps

    def __getitem__(self, key: str) -> Any:
        for m in self._maps:
            if key in m:
                return m[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(k for m in self._maps for k in m))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class DecoderConfig:
    """The decoder's facts (`text`) and the wrapper's (`outer`)."""

    outer: Mapping[str, Any]
    text: Mapping[str, Any]
    config_class: str | None
    """transformers class that supplied defaults; None: read as written (custom code)"""
    custom_code: bool
    """the checkpoint ships its own config code (auto_map) that specpair did not run"""
    written: Mapping[str, Any] = field(default_factory=dict)
    """the decoder's keys as the file spells them (no class defaults)"""

    @property
    def merged(self) -> Mapping[str, Any]:
        """The decoder's keys, then the wrapper's (text_config semantics)."""
        return _Chain(self.text, self.outer)

    @property
    def source(self) -> str:
        if self.config_class is None:
            return ("config.json as written (custom config code not run: no transformers "
                    f"{TRANSFORMERS_VERSION} class for its model_type)")
        return f"config.json through transformers {TRANSFORMERS_VERSION} {self.config_class}"


def _config_class(model_type: Any) -> Any:
    if not isinstance(model_type, str):
        return None
    # transformers prints an advisory "PyTorch was not found" on import; specpair needs
    # only its configuration classes, so the advice is noise in our CLI's output
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.utils import logging as hf_logging

    # rope validation warnings are about the checkpoint's training metadata, not KV
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    name = ENGINE_ALIASES.get(model_type, model_type)
    # _LazyConfigMapping.get answers None for every key in this release: index it
    return CONFIG_MAPPING[name] if name in CONFIG_MAPPING else None  # noqa: SIM401


def _through_class(data: dict[str, Any]) -> tuple[ConfigView, ConfigView | None, str] | None:
    cls = _config_class(data.get("model_type"))
    if cls is None:
        return None
    try:
        instance = cls.from_dict(dict(data))
    except Exception as exc:  # the class's own validators raise their own error types
        raise ValueError(f"transformers {TRANSFORMERS_VERSION} {cls.__name__} rejects the "
                         f"config: {exc}") from exc
    text = instance.get_text_config(decoder=True)
    if text is instance:
        return ConfigView(instance), None, cls.__name__
    return ConfigView(instance), ConfigView(text), type(text).__name__


def read(config: dict[str, Any]) -> DecoderConfig:
    """The decoder's config, as the engines' AutoConfig gives it."""
    decoder = _read(config)
    nested = next((config[k] for k in ("text_config", *NESTED_DECODER_KEYS)
                   if isinstance(config.get(k), dict)), None)
    written = {**config, **nested} if nested is not None else config
    return DecoderConfig(decoder.outer, decoder.text, decoder.config_class,
                         decoder.custom_code, written)


def _read(config: dict[str, Any]) -> DecoderConfig:
    custom = isinstance(config.get("auto_map"), dict) and bool(config["auto_map"])
    for key in NESTED_DECODER_KEYS:
        nested = config.get(key)
        if isinstance(nested, dict):
            found = _through_class(nested)
            if found is None:
                return DecoderConfig(config, nested, None, custom)
            outer, text, name = found
            return DecoderConfig(config, _Chain(text, outer) if text else outer, name, custom)
    found = _through_class(config)
    if found is None:
        nested = config.get("text_config")
        return DecoderConfig(config, nested if isinstance(nested, dict) else {}, None, custom)
    outer, text, name = found
    # the draft blocks (dflash_config, eagle_config, speculators_config) and other keys
    # the class does not model are kept as written
    return DecoderConfig(_Chain(outer, config), text or {}, name, custom)
