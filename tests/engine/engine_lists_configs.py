"""The parts of tests/engine/engine_lists.py that read how a release reads configs and
sizes its built-in MTP drafts (imported by it; runs in the release's environment).

- `config_classes`: every model type of the release's config registry (SGLang
  srt/utils/hf_transformers/common.py `_CONFIG_REGISTRY`, vLLM
  vllm/transformers_utils/config.py `_CONFIG_REGISTRY`), each with the class that reads it:
  `reads_as` is the transformers model type whose class it is, or which it subclasses
  changing nothing but its name (an alias: DeepSeek V3.2's `deepseek_v32`); None where the
  class is the release's own (or changes how a transformers class reads); `renamed` is what
  an own class reads each geometry attribute from, where the key has another name (attribute
  -> config.json key): its `attribute_map` (ChatGLM's `num_hidden_layers` from `num_layers`)
  and what its `__init__` copies from a parameter of another name (ChatGLM's `vocab_size`
  from `padded_vocab_size`, `max_position_embeddings` from `seq_length`), found by giving
  each parameter alone a value no default has and reading the attributes back.
- `vllm_mtp_layers`: how many built-in MTP layers vLLM's draft has, by architecture and by
  model type: `SpeculativeConfig.hf_config_override` (vllm/config/speculative.py) puts the
  draft's config to an MTP architecture, and that architecture's model class
  (model_executor/models/registry.py `_SPECULATIVE_DECODING_MODELS`) sets
  `self.num_mtp_layers` from it, read from the class's module source as written.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

BENIGN = {"__module__", "__qualname__", "__doc__", "model_type", "__dict__", "__weakref__",
          "__annotations__", "__static_attributes__", "__firstlineno__"}
# attributes a config class's own body may not set for it to read a config as its base does
GEOMETRY = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
            "hidden_size", "vocab_size", "max_position_embeddings", "sliding_window",
            "layer_types", "kv_lora_rank", "qk_rope_head_dim", "num_nextn_predict_layers",
            "attribute_map"}


def _transformers_names() -> dict[str, str]:
    """transformers' model type -> the config class name it reads it with."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return dict(CONFIG_MAPPING_NAMES)


def _from_transformers(klass: type) -> bool:
    return klass.__module__.split(".")[0] == "transformers"


def _own_rules(cls: type) -> bool:
    """Whether the class body defines code or geometry of its own: a function written in
    the class's own module (what a decorator or dataclass generates is not)."""
    module = sys.modules.get(cls.__module__)
    here = getattr(module, "__file__", None)
    for name, value in vars(cls).items():
        if name in BENIGN:
            continue
        function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if isinstance(function, types.FunctionType) and function.__code__.co_filename == here:
            return True
        if name in GEOMETRY:
            return True
    return False


# the attributes specpair's config reading takes a layout from (model/config_geometry.py)
READ = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
        "hidden_size", "vocab_size", "max_position_embeddings", "sliding_window",
        "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
        "num_nextn_predict_layers", "n_routed_experts", "num_experts", "num_local_experts",
        "num_experts_per_tok", "moe_intermediate_size", "intermediate_size",
        "linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim",
        "linear_value_head_dim", "linear_conv_kernel_dim", "first_k_dense_replace")
# a value no config class defaults to, and small: a class that builds per-layer lists
# from a layer count (and validates every item, as huggingface_hub's strict dataclasses
# do) spent 140 s of CPU per vLLM release on 7,340,033 layers
SENTINEL = 10_007


def _copied(cls: type) -> dict[str, str]:
    """attribute -> the `__init__` parameter of another name it is set from."""
    try:
        parameters = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
    found = {}
    for name, parameter in parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
            continue
        try:
            instance = cls(**{name: SENTINEL})
        except Exception:  # a parameter that must be of another type: not a copy
            continue
        for attribute in READ:
            if attribute != name and getattr(instance, attribute, None) == SENTINEL:
                found.setdefault(attribute, name)
    return found


def _entry(model_type: str, cls: type, names: Mapping[str, str]) -> dict[str, Any]:
    # transformers' model types by class name; a class registered under several names
    # (Step3p7TextConfig: step3p5 too) answers to the model type's own name first
    types_of = {name: t for t, name in names.items()}
    types_of.update({names[model_type]: model_type} if model_type in names else {})
    base = next((k for k in cls.__mro__ if _from_transformers(k) and k.__name__ in types_of),
                None)
    reads_as = None
    if base is not None and (base is cls or not _own_rules(cls)):
        reads_as = types_of[base.__name__]
    renamed = {} if reads_as else {
        **_copied(cls), **{str(a): str(k) for a, k in
                           (getattr(cls, "attribute_map", None) or {}).items()}}
    return {"class": cls.__name__, "reads_as": reads_as, "renamed": dict(sorted(renamed.items()))}


def config_classes(registry: Mapping[str, Any],
                   load: Callable[[str], type]) -> dict[str, dict[str, Any]]:
    names = _transformers_names()
    found = {}
    for model_type in sorted(registry):
        try:
            cls = load(model_type)
        except Exception as exc:  # a class the release cannot import here: read by name only
            found[model_type] = {"class": f"unloadable: {type(exc).__name__}",
                                 "reads_as": None, "renamed": {}}
            continue
        found[model_type] = _entry(model_type, cls, names)
    return found


# --------------------------------------------------------------------------- vLLM MTP


class _Strict(types.SimpleNamespace):
    """A PretrainedConfig stand-in: an attribute it was not given raises, as a real
    config's does (so `getattr(config, key, default)` takes the default)."""

    def update(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            setattr(self, key, value)

    def get_text_config(self, *args: Any, **kwargs: Any) -> _Strict:
        return self


def _num_mtp_layers(source: str) -> ast.expr | None:
    """The expression a model module assigns to `self.num_mtp_layers` (first one; a local
    name assigned before it is followed to its own value)."""
    tree = ast.parse(source)
    value = next((node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Attribute) and t.attr == "num_mtp_layers"
                          for t in node.targets)), None)
    if isinstance(value, ast.Name):
        value = next((node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == value.id
                              for t in node.targets)), None)
    return value


def _evaluate(expr: ast.expr | None, config: Any) -> int | None:
    """A constant, `config.KEY` (None where the config lacks it: the engine fails) or
    `getattr(config, "KEY", DEFAULT)`; anything else: None (not read)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return expr.value
    if isinstance(expr, ast.Attribute):
        return getattr(config, expr.attr, None)
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) == "getattr" \
            and len(expr.args) == 3 and isinstance(expr.args[1], ast.Constant) \
            and isinstance(expr.args[2], ast.Constant):
        return getattr(config, str(expr.args[1].value), expr.args[2].value)
    return None


def _module_source(module: str, cls: str) -> str | None:
    """The source of the file defining class `cls` of registry module `module` (a
    package's file that defines it, where the package re-exports it)."""
    name = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return None
    files = [Path(spec.origin)]
    if spec.submodule_search_locations:
        files += sorted(p for d in spec.submodule_search_locations for p in Path(d).rglob("*.py"))
    texts = [f.read_text(encoding="utf-8") for f in files]
    return next((t for t in texts if f"class {cls}(" in t), texts[0])


def _draft_layers(override: Callable[[Any], Any], drafts: Mapping[str, tuple[str, str]],
                  model_type: str, arch: str, configured: int | None) -> int | str | None:
    config = _Strict(model_type=model_type, architectures=[arch])
    if configured is not None:
        config.num_nextn_predict_layers = configured
    try:
        config = override(copy.deepcopy(config))
    except Exception:  # a rewrite that needs a real config class: not read here
        return "skip"
    draft = (getattr(config, "architectures", None) or [arch])[0]
    if draft == arch or draft not in drafts:
        return "skip"
    source = _module_source(*drafts[draft])
    return _evaluate(_num_mtp_layers(source), config) if source else None


def _counts(override: Callable[[Any], Any], drafts: Mapping[str, tuple[str, str]],
            model_type: str, arch: str) -> dict[str, Any] | None:
    unset = _draft_layers(override, drafts, model_type, arch, None)
    configured = _draft_layers(override, drafts, model_type, arch, 3)
    # not rewritten, not read (the class's count is no expression read here), or the
    # config's own count: the config as written
    if "skip" in (unset, configured) or (unset is None and configured in (3, None)):
        return None
    return {"unset": unset, "configured_3": configured}


def vllm_mtp_layers(override: Callable[[Any], Any], strings: set[str],
                    drafts: Mapping[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """`built_in_mtp_layers` (by architecture, any model type) and
    `built_in_mtp_layers_by_model_type` (any architecture): each candidate is a name
    `hf_config_override` spells, put to it with a neutral partner."""
    names = {s for s in strings if s.isidentifier()}
    by_arch, by_type = {}, {}
    for arch in sorted(n for n in names if n[:1].isupper()):
        found = _counts(override, drafts, "unlisted", arch)
        if found is not None:
            by_arch[arch] = found
    for model_type in sorted(n for n in names if n[:1].islower()):
        found = _counts(override, drafts, model_type, "UnlistedForCausalLM")
        if found is not None:
            by_type[model_type] = found
    return {"built_in_mtp_layers": by_arch, "built_in_mtp_layers_by_model_type": by_type}
