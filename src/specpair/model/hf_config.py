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

Where an engine reads a model type with a config class of its own registry, how it reads
it comes down as data (`EngineClass`, read from each release by the engines layer): an
alias is read through the transformers class it names, an own class's renamed keys are
read under their attribute names.

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



@dataclass(frozen=True)
class EngineClass:
    """How the supported engine releases read one model type of their config registries
    (each release's engine_lists.yaml `config_classes`, read from its own registry: SGLang
    srt/utils/hf_transformers/common.py `_CONFIG_REGISTRY`, vLLM
    vllm/transformers_utils/config.py `_CONFIG_REGISTRY`). The engines layer passes these
    down as data (`specpair.engines.engine_lists.config_classes`)."""

    reads_as: str | None = None
    """the transformers model type whose class reads it (DeepSeek V3.2's `deepseek_v32`
    is read by DeepseekV3Config); None: its own name"""
    renamed: Mapping[str, str] = field(default_factory=dict)
    """attribute -> the config.json key the releases' own classes read it from, where the
    names differ (`attribute_map`, or an `__init__` parameter: ChatGLM's
    `num_hidden_layers` from `num_layers`, `vocab_size` from `padded_vocab_size`)"""
    readers: tuple[str, ...] = ()
    """the releases that read it with a class of their own ("sglang 0.5.23 ChatGLMConfig"):
    a layout fact only transformers' default supplies need not be theirs"""
    conflict: str | None = None
    """why the releases' readings cannot be one (they rename a key differently)"""


EngineClasses = Mapping[str, EngineClass]
NO_ENGINE_CLASSES: EngineClasses = {}

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
    renamed_by: tuple[str, ...] = ()
    """the engines' own classes whose renamed keys were read (`EngineClass.readers`)"""

    @property
    def merged(self) -> Mapping[str, Any]:
        """The decoder's keys, then the wrapper's (text_config semantics)."""
        return _Chain(self.text, self.outer)

    @property
    def source(self) -> str:
        renamed = (f", keys renamed as {', '.join(self.renamed_by)} read them"
                   if self.renamed_by else "")
        if self.config_class is None:
            return ("config.json as written (custom config code not run: no transformers "
                    f"{TRANSFORMERS_VERSION} class for its model_type){renamed}")
        return (f"config.json through transformers {TRANSFORMERS_VERSION} "
                f"{self.config_class}{renamed}")


def _config_class(model_type: Any, classes: EngineClasses) -> Any:
    if not isinstance(model_type, str):
        return None
    # transformers prints an advisory "PyTorch was not found" on import; specpair needs
    # only its configuration classes, so the advice is noise in our CLI's output
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.utils import logging as hf_logging

    # rope validation warnings are about the checkpoint's training metadata, not KV
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    entry = classes.get(model_type)
    name = entry.reads_as if entry is not None and entry.reads_as else model_type
    # _LazyConfigMapping.get answers None for every key in this release: index it
    return CONFIG_MAPPING[name] if name in CONFIG_MAPPING else None  # noqa: SIM401


def _through_class(data: dict[str, Any], classes: EngineClasses
                   ) -> tuple[ConfigView, ConfigView | None, str] | None:
    cls = _config_class(data.get("model_type"), classes)
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


def reading_class(model_type: str, classes: EngineClasses = NO_ENGINE_CLASSES) -> str | None:
    """The transformers class that reads `model_type` here (None: read as written)."""
    cls = _config_class(model_type, classes)
    return None if cls is None else str(cls.__name__)


def renamed(config: dict[str, Any], classes: EngineClasses) -> dict[str, Any]:
    """The config with the keys the engines' own classes rename also under their
    attributes' names (what `read` reads)."""
    return _renamed(config, classes, [])


def _renamed(data: dict[str, Any], classes: EngineClasses,
             readers: list[str]) -> dict[str, Any]:
    """`data` with each key an engine's own class renames also under the attribute's name
    (as the class's `attribute_map` or `__init__` reads it), nested decoder configs
    included. Only where transformers has no class for the model type: where it has, a
    release without a class of its own reads it through transformers', so a layout fact
    the file spells under another name is not known to be every release's (the own-class
    refusal, `config_geometry`, names it)."""
    out = dict(data)
    model_type = out.get("model_type")
    entry = classes.get(model_type) if isinstance(model_type, str) else None
    if entry is not None and _config_class(model_type, classes) is None:
        for attribute, key in entry.renamed.items():
            if attribute not in out and key in out:
                out[attribute] = out[key]
                readers.extend(r for r in entry.readers if r not in readers)
    for key in ("text_config", *NESTED_DECODER_KEYS):
        if isinstance(out.get(key), dict):
            out[key] = _renamed(out[key], classes, readers)
    return out


def read(config: dict[str, Any], classes: EngineClasses = NO_ENGINE_CLASSES) -> DecoderConfig:
    """The decoder's config, as the engines' AutoConfig gives it (`classes`: how the
    engines' own config registries read model types; none: transformers' alone)."""
    readers: list[str] = []
    config = _renamed(config, classes, readers)
    decoder = _read(config, classes)
    nested = next((config[k] for k in ("text_config", *NESTED_DECODER_KEYS)
                   if isinstance(config.get(k), dict)), None)
    written = {**config, **nested} if nested is not None else config
    return DecoderConfig(decoder.outer, decoder.text, decoder.config_class,
                         decoder.custom_code, written, tuple(readers))


def _read(config: dict[str, Any], classes: EngineClasses) -> DecoderConfig:
    custom = isinstance(config.get("auto_map"), dict) and bool(config["auto_map"])
    for key in NESTED_DECODER_KEYS:
        nested = config.get(key)
        if isinstance(nested, dict):
            found = _through_class(nested, classes)
            if found is None:
                return DecoderConfig(config, nested, None, custom)
            outer, text, name = found
            return DecoderConfig(config, _Chain(text, outer) if text else outer, name, custom)
    found = _through_class(config, classes)
    if found is None:
        nested = config.get("text_config")
        return DecoderConfig(config, nested if isinstance(nested, dict) else {}, None, custom)
    outer, text, name = found
    # the draft blocks (dflash_config, eagle_config, speculators_config) and other keys
    # the class does not model are kept as written
    return DecoderConfig(_Chain(outer, config), text or {}, name, custom)
