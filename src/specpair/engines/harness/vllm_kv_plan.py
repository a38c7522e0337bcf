"""vLLM's own KV-cache planning for a list of cases (run by the oracle test), in whichever
release `vllm` imports as (0.33.0 or 0.32.0, tests/engine/releases.py).

Reads a JSON list of cases on stdin and prints one JSON list of results: the KV cache
groups, bytes per block, blocks and the capacity vLLM reports ("GPU KV cache size: N
tokens") for the given KV budget. The numbers come from the engine's own code:
`ModelConfig` reads the config.json (head counts per rank, head size, dtype, MLA);
each layer's spec is built with the engine's spec classes the way `Attention` /
`MLAAttention.get_kv_cache_spec` build them; `get_kv_cache_groups`,
`get_kv_cache_config_from_groups` and `get_kv_cache_capacity` plan the pool.

Stand-ins, because no GPU runs here (each named where it is used):
- `IN_PROCESS_REGISTRY`: vLLM inspects a model class in a fresh subprocess (CUDA
  safety); here the inspection runs in-process, which gives the same answer faster.
- `ENGINE_CONFIG`: the engine's `VllmConfig` applies the CUDA platform's settings in its
  constructor, which needs a GPU. The planning functions read only the sub-configs
  (real `ModelConfig`, `CacheConfig`, `ParallelConfig`, `AttentionConfig`), the
  scheduler's hybrid-manager switch (decided as VllmConfig decides it,
  `hybrid_manager_disabled`) and `max_in_flight_tokens`, so those are handed over
  in a namespace, with the in-flight token count the case states.
- `CACHE_WINDOW`: `EngineArgs.create_engine_config` (engine/arg_utils.py, 0.32.0:2248-2254,
  0.33.0:2288-2294, 0.34.0:2321-2327) gives `CacheConfig.sliding_window` the model's
  window when its text config has no `layer_types` (or only sliding ones), and each
  `Attention` given no window of its own takes that one (layers/attention/attention.py:
  266-273 in 0.32.0 and 0.33.0, 282-289 in 0.34.0): a window on every layer, target and
  draft alike. The rest of that function
  needs a GPU, so the rule is applied here, and `cache_window` first checks that the
  release's own function still holds it, word for word.
- `LAYER_KINDS`: which layers slide is decided in each model's constructor; for the
  corpus families that is `layer_types` in the config (gpt_oss.py:175 slides the even
  layers, which is what gpt-oss's layer_types say; llama4.py makes the RoPE layers
  chunked; the script checks that they agree).
- The sliding layers' block size is the primary block size: the attention backend
  vLLM picks on Hopper (FLASH_ATTN) runs it unsplit (attention.py:611-660).
- The KV cache layout: the backends vLLM picks on Hopper (FLASH_ATTN, FLASH_ATTN_MLA)
  declare none, so the engine's `get_supported_kv_cache_layouts` gives its default
  preference and `resolve_kv_cache_layout` picks from it.
- `HOPPER_BACKENDS`: for Gated DeltaNet hybrids the platform aligns the attention block
  size to the state page (`Platform._align_hybrid_block_size`) after the model is built;
  finding the attention backends walks the built layers, so `_find_non_ssm_backends`
  answers FLASH_ATTN, the backend vLLM picks for them on Hopper.
- `GDN_LAYERS`: each Gated DeltaNet layer is the engine's `QwenGatedDeltaNetAttention`
  with only the attributes its constructor reads from the config set (building it
  allocates CUDA weights); its own `get_kv_cache_spec` then builds the state spec. Its
  prefill checkpoint alignment is the one it takes on Hopper, where the GDN prefill
  backend resolves to FlashInfer (`_resolve_gdn_prefill_backend`, SM90).
- `REPLAYSSM` (0.34.0): the GDN layers read `VllmConfig.use_flashinfer_replayssm` (their
  state alignment, model_executor/layers/mamba/mamba_utils.py:31); it is False for every
  command specpair writes, which never sets use_replayssm (named where it is set).
- `NO_TORCHVISION`: Qwen3.5's model file imports the Qwen3-VL processors, which import
  torchvision; the engines session uninstalls it (its CUDA build crashes beside the CPU
  torch). Without a torchvision, `InertModules` serves torchvision and its submodules as
  modules of inert names that raise if called (KV planning calls none), so that the
  model file imports.
- `NO_RETRY_PAUSE`: `get_config` parses config.json through `with_retry`, which waits 2 s
  before its second try "to tolerate a concurrent HF cache refresh briefly hiding
  config.json" (transformers_utils/config.py, repo_utils.py). The corpus folders are
  local and never refreshed: a config the engine refuses is refused again on the second
  try, after 2 s asleep (118 s per release over the corpus). The retry still runs, with
  no pause; what the engine answers does not change.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import sys
import traceback
import types
from typing import Any


def plan(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.config import CacheConfig
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        resolve_kv_cache_layout,
    )
    try:
        from vllm.v1.core.kv_cache_planning import (
            get_kv_cache_config_from_groups,
            get_kv_cache_groups,
        )
    except ModuleNotFoundError:  # 0.32.0 keeps the planner in kv_cache_utils
        from vllm.v1.core.kv_cache_utils import (  # type: ignore[no-redef]
            get_kv_cache_config_from_groups,
            get_kv_cache_groups,
        )
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity
    from vllm.version import __version__

    target = model_config(case, case["target"])
    cache_config = CacheConfig(block_size=case["block_size"],
                               cache_dtype=case["kv_cache_dtype"],
                               sliding_window=cache_window(target))
    # EngineArgs: prefix caching defaults to what the model supports (on for hybrids)
    cache_config.enable_prefix_caching = target.is_prefix_caching_supported
    engine_config = engine_namespace(case, target, cache_config)
    text = target.hf_text_config
    layer_kinds = getattr(text, "layer_types", None)  # LAYER_KINDS
    check_layer_kinds(target, layer_kinds)
    if target.is_hybrid:
        hybrid_setup(target, cache_config, engine_config, layer_kinds, case)
    specs = layer_specs(case, engine_config, target, case["tp"], "model.layers",
                        text.num_hidden_layers, layer_kinds)
    draft_layers = 0
    if case.get("draft") == "bundled":
        draft_layers = built_in_draft_layers(target)
        specs |= layer_specs(case, engine_config, target, case["tp"], "mtp.layers",
                             draft_layers, None)
    elif case.get("draft"):
        draft = model_config(case, case["draft"], draft=True)
        draft_layers = draft.hf_text_config.num_hidden_layers
        specs |= layer_specs(case, engine_config, draft, case["draft_tp"], "draft.layers",
                             draft_layers, None)

    # FLASH_ATTN and FLASH_ATTN_MLA declare no layout of their own: the default preference
    supported = [layout.name for layout in get_supported_kv_cache_layouts(())]
    layout = resolve_kv_cache_layout(engine_config, [supported], specs.values())
    cache_config.kv_cache_layout = layout.name
    groups = get_kv_cache_groups(engine_config, dict(specs))
    config = get_kv_cache_config_from_groups(engine_config, groups, case["available_bytes"])
    tokens, concurrency = get_kv_cache_capacity(engine_config, config)
    tensor = config.kv_cache_tensors[0]
    return {
        "ok": True,
        "groups": [len(g.layer_names) for g in config.kv_cache_groups],
        "num_blocks": config.num_blocks,
        "bytes_per_block": tensor.size // config.num_blocks,
        "capacity_tokens": tokens,
        "max_concurrency": concurrency,
        "layout": layout.name,
        "dtype_bytes": torch.tensor([], dtype=kv_cache_dtype_str_to_dtype(
            case["kv_cache_dtype"], target)).element_size(),
        "draft_layers": draft_layers,
        "block_size": cache_config.block_size,
        "cache_window": cache_config.sliding_window,
        "version": __version__,
    }


# CACHE_WINDOW: the lines of EngineArgs.create_engine_config that set the window
_CACHE_WINDOW_RULE = (
    'layer_types = getattr(model_config.hf_text_config, "layer_types", None)',
    'if layer_types is None or all(lt == "sliding_attention" for lt in layer_types):',
    "sliding_window = model_config.get_sliding_window()",
    "sliding_window=sliding_window,")


def cache_window(target: Any) -> int | None:
    """`CacheConfig.sliding_window` as `EngineArgs.create_engine_config` sets it for the
    target's `ModelConfig` (CACHE_WINDOW); raises if the release's function no longer
    says so, rather than answer with a rule the release dropped."""
    import inspect

    from vllm.engine.arg_utils import EngineArgs

    source = " ".join(inspect.getsource(EngineArgs.create_engine_config).split())
    missing = [line for line in _CACHE_WINDOW_RULE if line not in source]
    if missing:
        raise RuntimeError(f"EngineArgs.create_engine_config no longer sets "
                           f"CacheConfig.sliding_window as CACHE_WINDOW reads it: {missing}")
    layer_types = getattr(target.hf_text_config, "layer_types", None)
    if layer_types is None or all(lt == "sliding_attention" for lt in layer_types):
        window: int | None = target.get_sliding_window()
        return window
    return None


def ask_cache_window(case: dict[str, Any]) -> dict[str, Any]:
    """The window the release gives every layer of the case's target that sets none of
    its own (None: none), from the release's `ModelConfig` of its config.json."""
    return {"ok": True, "cache_window": cache_window(model_config(case, case["target"]))}


def model_config(case: dict[str, Any], path: str, draft: bool = False) -> Any:
    """The target's `ModelConfig`, or the draft's as `SpeculativeConfig` builds it: no
    length of its own (--speculative-config sets none), the target's as its limit."""
    from vllm.config import ModelConfig

    if draft:
        return ModelConfig(model=path, runner="draft", max_model_len=None,
                           spec_target_max_model_len=case["max_model_len"],
                           trust_remote_code=False, skip_tokenizer_init=True)
    return ModelConfig(model=path, max_model_len=case["max_model_len"],
                       trust_remote_code=False, skip_tokenizer_init=True)


def engine_namespace(case: dict[str, Any], target: Any, cache_config: Any) -> Any:
    """What the planning functions read of `VllmConfig` (ENGINE_CONFIG)."""
    from vllm.config import AttentionConfig, ParallelConfig
    from vllm.config.speculative import SpeculativeConfig

    speculative_tokens = case.get("num_speculative_tokens", 0)
    return types.SimpleNamespace(
        model_config=target, cache_config=cache_config,
        parallel_config=ParallelConfig(tensor_parallel_size=case["tp"]),
        attention_config=AttentionConfig(), kv_transfer_config=None,
        scheduler_config=types.SimpleNamespace(
            disable_hybrid_kv_cache_manager=hybrid_manager_disabled(case, target),
            enable_chunked_prefill=target.is_chunked_prefill_supported),
        speculative_config=speculative_namespace(SpeculativeConfig, case, speculative_tokens)
        if speculative_tokens else None,
        num_speculative_tokens=speculative_tokens, additional_config={},
        compilation_config=types.SimpleNamespace(static_forward_context={}),
        max_in_flight_tokens=case["max_in_flight_tokens"],
        # REPLAYSSM (0.34.0): VllmConfig.use_flashinfer_replayssm is use_replayssm and a
        # FlashInfer mamba backend; no command specpair writes turns replay-SSM on
        # (CacheConfig.use_replayssm defaults to False), so the GDN state keeps alignment 1
        use_flashinfer_replayssm=bool(getattr(cache_config, "use_replayssm", False)))


def check_layer_kinds(target: Any, layer_kinds: list[str] | None) -> None:
    """LAYER_KINDS: the model constructors of the corpus families agree with layer_types."""
    text = target.hf_text_config
    if target.architecture == "GptOssForCausalLM":
        assert layer_kinds == ["sliding_attention" if i % 2 == 0 else "full_attention"
                               for i in range(text.num_hidden_layers)]
    if target.architecture.startswith("Llama4"):
        # llama4.py, Llama4Attention: chunked local attention on the RoPE layers
        # (no_rope_layers[i] != 0) when attention_chunk_size is set, else full
        assert layer_kinds == [
            "chunked_attention" if text.no_rope_layers[i] and text.attention_chunk_size
            else "full_attention" for i in range(text.num_hidden_layers)], layer_kinds


def built_in_draft_layers(target: Any) -> int:
    """The MTP layers the draft model class of `target` builds."""
    text = target.hf_text_config
    if target.architecture == "Qwen3NextForCausalLM":
        # qwen3_next_mtp.py: Qwen3NextMTP.num_mtp_layers
        return int(getattr(text, "num_nextn_predict_layers", 1))
    if target.architecture.startswith("Qwen3_5"):
        # qwen3_5_mtp.py: Qwen3_5MTP.num_mtp_layers
        return int(getattr(text, "mtp_num_hidden_layers", 1))
    return int(getattr(text, "num_nextn_predict_layers", 0) or 0)


def layer_specs(case: dict[str, Any], engine_config: Any, mc: Any, tp: int, prefix: str,
                layers: int, kinds: list[str] | None) -> dict[str, Any]:
    """Each layer's spec as its `Attention` / `MLAAttention` / GDN layer builds it."""
    from vllm.config import ParallelConfig
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        MLAAttentionSpec,
        SlidingWindowSpec,
    )

    parallel = ParallelConfig(tensor_parallel_size=tp)
    # Attention resolves the KV dtype against vllm_config.model_config: the target's
    dtype = kv_cache_dtype_str_to_dtype(case["kv_cache_dtype"], engine_config.model_config)
    block = engine_config.cache_config.block_size  # the platform may have aligned it
    specs: dict[str, Any] = {}
    for i in range(layers):
        name = f"{prefix}.{i}.attn"
        if kinds is not None and kinds[i] == "linear_attention":
            gdn = engine_config.compilation_config.static_forward_context[
                f"{prefix}.{i}.linear_attn"]
            specs[name] = gdn.get_kv_cache_spec(engine_config)
            continue
        if mc.use_mla:
            specs[name] = MLAAttentionSpec(
                block_size=block, num_kv_heads=1, max_tp_shards=1,
                head_size=mc.get_head_size(), dtype=dtype,
                cache_dtype_str=case["kv_cache_dtype"])
            continue
        common = {"block_size": block, "num_kv_heads": mc.get_num_kv_heads(parallel),
                  "head_size": mc.get_head_size(), "head_size_v": mc.get_head_size(),
                  "dtype": dtype}
        if kinds is not None and kinds[i] == "sliding_attention":
            specs[name] = SlidingWindowSpec(**common, sliding_window=mc.get_sliding_window())
        elif engine_config.cache_config.sliding_window is not None:
            # an Attention with no window of its own takes the cache's (CACHE_WINDOW)
            specs[name] = SlidingWindowSpec(
                **common, sliding_window=engine_config.cache_config.sliding_window)
        elif kinds is not None and kinds[i] == "chunked_attention":
            # ChunkedLocalAttention.get_kv_cache_spec
            specs[name] = ChunkedLocalAttentionSpec(
                **common, attention_chunk_size=mc.hf_text_config.attention_chunk_size)
        else:
            specs[name] = FullAttentionSpec(**common)
    return specs


def hybrid_manager_disabled(case: dict[str, Any], target: Any) -> bool:
    """VllmConfig.__post_init__'s hybrid-manager switch (part of ENGINE_CONFIG: it runs in
    the constructor that needs a GPU, vllm.py:2235-2290 in 0.33.0): the command's
    --disable-hybrid-kv-cache-manager, or the release turning the manager off for a model
    with chunked local attention when the speculative method drafts from the target's
    hidden states (asked of the release's own predicate, `drafts_from_hidden_states`)."""
    if case["disable_hybrid_kv_cache_manager"]:
        return True
    method = case.get("engine_method")
    return bool(target.attention_chunk_size is not None and case.get("num_speculative_tokens")
                and method and drafts_from_hidden_states(method))


def hidden_state_predicate() -> str:
    """The predicate of a draft that reads the target's hidden states which this release
    offers: `SpeculativeConfig.use_eagle` in 0.32.0 and 0.33.0, the method's
    `SpeculatorConfig.uses_target_hidden_states` from 0.34.0 (which has speculator
    configs). tests/engine/engine_lists.py holds it equal to the one
    `VllmConfig.__post_init__` tests."""
    try:
        from vllm.v1.worker.gpu.spec_decode import speculator_config  # noqa: F401
    except ImportError:
        return "use_eagle"
    return "uses_target_hidden_states"


def drafts_from_hidden_states(method: str) -> bool:
    """The predicate VllmConfig.__post_init__ tests beside attention_chunk_size
    (`hidden_state_predicate`), for the method as the release spells it."""
    if hidden_state_predicate() == "use_eagle":
        from vllm.config.speculative import SpeculativeConfig

        return bool(SpeculativeConfig.use_eagle(types.SimpleNamespace(method=method)))
    from vllm.utils.import_utils import resolve_obj_by_qualname
    from vllm.v1.worker.gpu.spec_decode import speculator_config

    name = speculator_config._CONFIG_BY_METHOD.get(method)
    return bool(name and resolve_obj_by_qualname(name).uses_target_hidden_states)


def speculative_namespace(cls: Any, case: dict[str, Any], tokens: int) -> Any:
    """What the planner reads of the SpeculativeConfig (part of ENGINE_CONFIG): the K, and
    for 0.32.0's EAGLE-group annotation (kv_cache_utils._annotate_eagle_groups, which flags
    groups and sizes nothing) the method, through the engine's own `use_eagle*` methods."""
    spec = types.SimpleNamespace(num_speculative_tokens=tokens, method=case.get("method"),
                                 disable_eagle_block_drop=False)
    for name in ("use_eagle", "use_eagle_block_drop"):
        if hasattr(cls, name):
            setattr(spec, name, types.MethodType(getattr(cls, name), spec))
    return spec


def hybrid_setup(target: Any, cache_config: Any, engine_config: Any,
                 layer_kinds: list[str], case: dict[str, Any]) -> None:
    """What `VllmConfig` and the platform do for an attention / Gated DeltaNet hybrid
    before the layers' KV specs are read: the architecture's config hook and
    `HybridAttentionMambaModelConfig` (prefix caching → mamba cache mode `align`), the
    built GDN layers, then `Platform.update_block_size_for_backend`'s hybrid alignment."""
    from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import (
        QwenGatedDeltaNetAttention,
    )
    from vllm.model_executor.models.config import (
        MODELS_CONFIG_MAP,
        HybridAttentionMambaModelConfig,
    )
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backends import gdn_attn
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    # 0.33.0 aligns GDN prefill checkpoints (its layer's own get_kv_cache_spec reads it);
    # 0.32.0 has neither the constant nor the override (MambaBase.get_kv_cache_spec)
    alignment = getattr(gdn_attn, "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT", None)

    hook = MODELS_CONFIG_MAP.get(target.architecture)
    if hook is not None:
        hook.verify_and_update_config(engine_config)
    HybridAttentionMambaModelConfig.verify_and_update_config(engine_config)
    text = target.hf_text_config
    assert layer_kinds is not None and "linear_attention" in layer_kinds, layer_kinds
    for i, kind in enumerate(layer_kinds):
        if kind != "linear_attention":
            continue
        layer = object.__new__(QwenGatedDeltaNetAttention)  # GDN_LAYERS
        layer.__dict__.update(
            tp_size=case["tp"], num_k_heads=text.linear_num_key_heads,
            num_v_heads=text.linear_num_value_heads, head_k_dim=text.linear_key_head_dim,
            head_v_dim=text.linear_value_head_dim,
            conv_kernel_size=text.linear_conv_kernel_dim,
            num_spec=engine_config.num_speculative_tokens,
            model_config=target, cache_config=cache_config, vllm_config=engine_config,
            _checkpoint_alignment=alignment
            if cache_config.mamba_cache_mode == "align" else None)
        engine_config.compilation_config.static_forward_context[
            f"model.layers.{i}.linear_attn"] = layer

    class HopperPlatform(Platform):
        @classmethod
        def _find_non_ssm_backends(cls, vllm_config: Any) -> Any:  # HOPPER_BACKENDS
            return [FlashAttentionBackend]

    HopperPlatform._align_hybrid_block_size(engine_config, FlashAttentionBackend)


class Inert:
    """A name a module imports at import time but KV planning never uses."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Inert:
        return Inert(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self._name} is an import-only stand-in (NO_TORCHVISION)")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


class InertModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `package` and its submodules as modules of `Inert` names (NO_TORCHVISION)."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package and not fullname.startswith(self.package + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0+inert"  # type: ignore[attr-defined]
        module.__getattr__ = lambda name: Inert(f"{spec.name}.{name}")  # type: ignore
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def missing_module(target: str) -> str | None:
    """The module the target's model file fails to import on, if any: the registry only
    logs it and ModelConfig reports "failed to be inspected"."""
    import importlib

    from vllm.model_executor.models import ModelRegistry
    from vllm.transformers_utils.config import get_config

    try:
        config = get_config(target, trust_remote_code=False)
    except Exception:  # a config transformers cannot read: the error says so already
        return None
    for arch in getattr(config, "architectures", []):
        model = ModelRegistry.models.get(arch)
        try:
            importlib.import_module(getattr(model, "module_name", "builtins"))
        except ModuleNotFoundError as error:
            return error.name
    return None


@functools.cache
def _set_up() -> None:
    import importlib.util

    import vllm.config
    import vllm.transformers_utils.config
    import vllm.v1.attention.backends.flash_attn
    import vllm.v1.core.kv_cache_utils
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()  # IN_PROCESS_REGISTRY
    config_module = vllm.transformers_utils.config  # NO_RETRY_PAUSE
    config_module.with_retry = functools.partial(config_module.with_retry, retry_delay=0)
    # after the engine's core is imported, so that only the model files see it
    if importlib.util.find_spec("torchvision") is None:  # NO_TORCHVISION
        sys.meta_path.append(InertModules("torchvision"))


def batch(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each case's plan (a case's exception is its result); the stand-ins once per
    process, which the tests keep for the next call (tests/engine/workers.py)."""
    _set_up()
    results = []
    for case in cases:
        try:
            results.append(ask_cache_window(case) if case.get("ask") == "cache_window"
                           else plan(case))
        except Exception as error:  # reported per case to the test
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}",
                            "trace": traceback.format_exc(limit=8)[-3000:],
                            "missing_module": missing_module(case["target"])})
    return results


def main() -> None:
    print(json.dumps(batch(json.loads(sys.stdin.read()))))


if __name__ == "__main__":
    main()
