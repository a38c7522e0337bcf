"""The lists an engine release decides for itself, read from its own code (run by
tests/engine/test_copied_decisions.py and by tools/engine_lists.py, which writes them into
each release's `engine_lists.yaml`).

    python tests/engine/engine_lists.py sglang|vllm   (the release's folder first on PYTHONPATH)

prints one JSON object. Nothing here is a copy: the candidates are every architecture
name the release's deciding functions and module-level name lists spell, and each is put
to the release's own function, so an entry the release adds to a set literal inside a
function is found too.

SGLang (srt/configs/model_config.py, srt/arg_groups/overrides.py):
- `hybrid_swa`: architectures `is_hybrid_swa_model` gives the hybrid-SWA pools for a text
  config with sliding layers and a window, each with how `get_hybrid_layer_ids` places its
  SWA layers: `layer_types` (the config's sliding layers), `every_fourth_full` (Llama 4's
  chunked layers: every layer but each 4th) or `own` (a rule of its own: MTP layer 0 only,
  `local_layer_ids`, `hybrid_layer_pattern`, every layer).
- `extra_buffer`: `_MAMBA_EXTRA_BUFFER_ARCHS`, the architectures whose `auto` mamba radix
  cache strategy resolves to extra_buffer.
- `quantization_methods`: the checkpoint quantization methods its registry accepts on a
  CUDA host, and the names its classes' `override_quantization_method` turn into one of
  theirs (anything else: "Unknown quantization method").
- `built_in_mtp_layers`: what `ModelConfig._config_draft_model` sets
  `num_nextn_predict_layers` to for each architecture (draft mode), whether or not the
  config names a count.

vLLM: `ssm_dtype_from_config` (the function `vllm` below), the built-in MTP layer
counts of its draft mode, `deprecated_quantization` (DEPRECATED_QUANTIZATION_METHODS,
which ModelConfig refuses without --allow-deprecated-quantization), and
`mla_model_types` (`is_deepseek_mla`: which configs get the MLA cache), and
`hybrid_manager_off_for_chunked` (the methods that turn the hybrid manager off for
chunked local attention).

Both: `config_classes`, the model types each reads with a config class of its own
registry (tests/engine/engine_lists_configs.py says how they are read).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

LAYERS = 8
LAYER_TYPES = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
               "full_attention", "full_attention", "sliding_attention", "full_attention"]


class _Config(types.SimpleNamespace):
    """A text config stand-in: an attribute it was not given reads as None."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def _strings(value: Any) -> set[str]:
    """Every string constant of a function's code, nested code and collections included."""
    found: set[str] = set()
    if isinstance(value, types.FunctionType):
        value = value.__code__
    if isinstance(value, types.CodeType):
        for const in value.co_consts:
            found |= _strings(const) if not isinstance(const, str) else {const}
    elif isinstance(value, (frozenset, set, tuple, list)):
        found |= {v for v in value if isinstance(v, str)}
    return found


def _candidates(module: types.ModuleType, *functions: Any) -> set[str]:
    names: set[str] = set()
    for function in functions:
        names |= _strings(function)
    for value in vars(module).values():
        if isinstance(value, (frozenset, set, tuple, list)) and value \
                and all(isinstance(v, str) for v in value):
            names |= set(value)
    return {n for n in names if n.isidentifier() and n[:1].isupper()}


def _layer_rule(mc: types.ModuleType, arch: str) -> str:
    config = _Config(num_hidden_layers=LAYERS, layer_types=list(LAYER_TYPES),
                     sliding_window=128)
    try:
        swa, full = mc.get_hybrid_layer_ids([arch], config)
    except Exception:  # a rule reading keys the stand-in lacks: not layer_types
        return "own"
    by_types = ([i for i, t in enumerate(LAYER_TYPES) if t == "sliding_attention"],
                [i for i, t in enumerate(LAYER_TYPES) if t == "full_attention"])
    fourth = ([i for i in range(LAYERS) if (i + 1) % 4], [i for i in range(LAYERS)
                                                          if not (i + 1) % 4])
    if (swa, full) == by_types:
        return "layer_types"
    if (swa, full) == fourth:
        return "every_fourth_full"
    return "own"


def _hybrid_swa(mc: types.ModuleType) -> dict[str, str]:
    config = _Config(num_hidden_layers=LAYERS, layer_types=list(LAYER_TYPES),
                     sliding_window=128)
    names = _candidates(mc, mc.is_hybrid_swa_model, mc.get_hybrid_layer_ids)
    return {a: _layer_rule(mc, a) for a in sorted(names)
            if mc.is_hybrid_swa_model([a], config)}


def _draft_layers(mc: types.ModuleType, arch: str, configured: int | None) -> int | None:
    config = _Config(architectures=[arch], num_nextn_predict_layers=configured,
                     layer_types=[], mtp_local_layer_ids=[])
    runner = _Config(is_draft_model=True, speculative_algorithm="EAGLE", hf_config=config,
                     hf_text_config=config, quantization=None)
    try:
        mc.ModelConfig._config_draft_model(runner)
    except Exception:  # a rewrite that needs a real config class: no count set here
        return configured
    layers = runner.hf_config.num_nextn_predict_layers
    text = runner.hf_text_config.num_nextn_predict_layers
    return layers if layers is not None else text


def _built_in_mtp_layers(mc: types.ModuleType) -> dict[str, dict[str, int]]:
    found = {}
    for arch in sorted(_candidates(mc, mc.ModelConfig._config_draft_model)):
        unset, configured = _draft_layers(mc, arch, None), _draft_layers(mc, arch, 3)
        if unset is not None or configured != 3:
            found[arch] = {"unset": unset, "configured_3": configured}
    return found


def sglang(_: Any = None) -> dict[str, Any]:
    import engine_lists_configs
    from stand_ins import TorchvisionStandIn

    sys.meta_path.insert(0, TorchvisionStandIn())
    from sglang.srt.arg_groups import overrides
    from sglang.srt.configs import model_config as mc
    from sglang.srt.speculative import spec_info, spec_registry
    from sglang.srt.utils.hf_transformers import common

    # --speculative-algorithm: SpeculativeAlgorithm.from_string's names and the aliases
    # the server arguments resolve (NEXTN, read as EAGLE)
    algorithms = {a.name for a in spec_info.SpeculativeAlgorithm if a.name != "NONE"}
    return {"hybrid_swa": _hybrid_swa(mc),
            "speculative_methods": sorted(algorithms | set(spec_registry._RESERVED_ALIASES)),
            "extra_buffer": sorted(overrides._MAMBA_EXTRA_BUFFER_ARCHS),
            "quantization_methods": _sglang_cuda_quantization(),
            "built_in_mtp_layers": _built_in_mtp_layers(mc),
            "config_classes": engine_lists_configs.config_classes(
                common._CONFIG_REGISTRY, common._CONFIG_REGISTRY.__getitem__)}


def _sglang_cuda_quantization() -> list[str]:
    """The checkpoint quantization methods `get_quantization_config` accepts on a CUDA host
    (srt/layers/quantization/__init__.py QUANTIZATION_METHODS): the module registers some
    by platform at import, so it is imported again with the platform CUDA_HOST."""
    import importlib

    from sglang.srt import utils

    saved = {name: getattr(utils, name) for name in ("is_cpu", "is_cuda", "is_npu", "is_xpu")
             if hasattr(utils, name)}
    for name in saved:  # CUDA_HOST: the platform checks answer as on a CUDA machine
        setattr(utils, name, (lambda: True) if name == "is_cuda" else (lambda: False))
    try:
        from sglang.srt.layers import quantization

        registry = importlib.reload(quantization).QUANTIZATION_METHODS
        # a checkpoint method a registered class turns into one of its own
        # (`override_quantization_method`, e.g. gptq → gptq_marlin) is accepted too: the
        # names those overrides test for
        overridden = set()
        for cls in registry.values():
            override = getattr(cls, "override_quantization_method", None)
            if override is not None:
                overridden |= {n for n in _strings(getattr(override, "__func__", override))
                               if re.fullmatch(r"[a-z][a-z0-9_-]*", n)}
        overridden.discard("quant_method")  # the key they read, not a method
        return sorted(set(registry) | overridden)
    finally:
        for name, function in saved.items():
            setattr(utils, name, function)


def _ssm_dtype_from_config(arch: str, cls: Any) -> bool:
    text = _Config(mamba_ssm_dtype="float16", architectures=[arch])
    vllm_config = _Config(cache_config=_Config(mamba_ssm_cache_dtype="auto"),
                          model_config=_Config(hf_text_config=text, hf_config=text))
    # a hook reading more than the stand-in has is judged by what it set before
    with contextlib.suppress(Exception):
        cls.verify_and_update_config(vllm_config)
    return bool(vllm_config.cache_config.mamba_ssm_cache_dtype == "float16")


def _mla_model_types(convertor: Any) -> list[str]:
    """`is_deepseek_mla`'s model types: those whose text config with a kv_lora_rank the
    release serves with its MLA cache (one latent per token); asked of the function for
    every lower-case name its code holds."""
    found = []
    for name in sorted(n for n in _strings(convertor.is_deepseek_mla)
                       if n.isidentifier() and n == n.lower()):
        # a plain namespace: the release tests hasattr(config, "compress_ratios")
        stand_in = _Config(hf_text_config=types.SimpleNamespace(model_type=name,
                                                                kv_lora_rank=512))
        try:
            if convertor.is_deepseek_mla(stand_in) is True:
                found.append(name)
        except Exception:  # a branch reading more than the stand-in has (EAGLE's model)
            continue
    return found


def _hybrid_manager_off_for_chunked() -> list[str]:
    """The methods (SpeculativeMethod's literals) with which VllmConfig.__post_init__
    turns the hybrid KV cache manager off for a model with chunked local attention, asked
    of the predicate the release's code tests there (read from its source, so a release
    that tests another one fails here rather than being read wrongly)."""
    from vllm.config import VllmConfig
    from vllm.config.speculative import SpeculativeMethod
    from vllm_kv_plan import drafts_from_hidden_states, hidden_state_predicate

    source = inspect.getsource(VllmConfig.__post_init__)
    rule = re.search(r"attention_chunk_size is not None\s*\):\s*if \(\s*"
                     r"self\.speculative_config is not None\s*"
                     r"and self\.speculative_config\.(\w+)", source)
    asked = hidden_state_predicate()  # the one the harness asks
    if rule is None or rule.group(1) != asked:
        raise RuntimeError("VllmConfig.__post_init__ switches the hybrid manager off for "
                           f"chunked attention by {rule and rule.group(1)}, the harness "
                           f"asks {asked}: read the release again")
    return sorted(m for m in _literals(SpeculativeMethod) if drafts_from_hidden_states(m))


def _literals(annotation: Any) -> set[str]:
    """Every string of a (nested) Literal type."""
    found: set[str] = set()
    for arg in typing.get_args(annotation):
        found |= {arg} if isinstance(arg, str) else _literals(arg)
    return found


def vllm(_: Any = None) -> dict[str, Any]:
    """`ssm_dtype_from_config`: the architectures whose config hook
    (model_executor/models/config.py MODELS_CONFIG_MAP, verify_and_update_config) makes
    the config's `mamba_ssm_dtype` the SSM state cache dtype under `auto`."""
    import engine_lists_configs
    from vllm.config.speculative import MTPModelTypes, SpeculativeConfig, SpeculativeMethod
    from vllm.model_executor.layers import quantization
    from vllm.model_executor.models import config as mc
    from vllm.model_executor.models import registry
    from vllm.transformers_utils import config as tc
    from vllm.transformers_utils.model_arch_config_convertor import (
        ModelArchConfigConvertorBase,
    )

    override = SpeculativeConfig.hf_config_override
    return {"speculative_methods": sorted(_literals(SpeculativeMethod)),
            # the MTP model types SpeculativeConfig reads as "mtp" (with a deprecation)
            "mtp_aliases": sorted(_literals(MTPModelTypes) - {"mtp"}),
            "deprecated_quantization": sorted(quantization.DEPRECATED_QUANTIZATION_METHODS),
            "mla_model_types": _mla_model_types(ModelArchConfigConvertorBase),
            "hybrid_manager_off_for_chunked": _hybrid_manager_off_for_chunked(),
            "ssm_dtype_from_config": sorted(
        arch for arch, cls in mc.MODELS_CONFIG_MAP.items() if _ssm_dtype_from_config(arch, cls)),
        **engine_lists_configs.vllm_mtp_layers(override, _strings(override),
                                                registry._SPECULATIVE_DECODING_MODELS),
        "config_classes": engine_lists_configs.config_classes(
            tc._CONFIG_REGISTRY, tc._CONFIG_REGISTRY.__getitem__)}


if __name__ == "__main__":
    # the stand-ins it imports: src/specpair/engines/harness/stand_ins.py
    sys.path.insert(1, str(Path(__file__).resolve().parents[2] / "src/specpair/engines/harness"))
    print(json.dumps({"sglang": sglang, "vllm": vllm}[sys.argv[1]](None), indent=1))
