"""Whether each engine release can run EAGLE-3 on a target architecture, from the
engine's own model registry (run by tests/engine/test_method_support.py).

Reads `{"engine": "sglang"|"vllm", "architectures": [...]}` on stdin and prints one JSON
object: architecture → true (the class exposes auxiliary hidden states), false (it does
not), or null (the engine's registry has no such architecture, or its class does not
import here). Without `architectures`, every architecture the registry lists
(tools/method_support.py writes the releases' method_support.yaml from that).

- vLLM 0.33.0: the class `ModelRegistry` resolves for the architecture, checked with
  `interfaces.supports_eagle3` (the check gpu_model_runner.py makes at load:
  "Model does not support EAGLE3 interface").
- SGLang 0.5.23: the class `ModelRegistry.models` maps the architecture to, checked for
  `set_eagle3_layers_to_capture` (attention_backend_setup.py::
  configure_aux_hidden_state_capture raises without it).

Stand-in: `IN_PROCESS_REGISTRY` as in vllm_kv_plan.py (vLLM loads model classes in a
subprocess for CUDA safety; in-process gives the same class). torchvision is served
inert as there (NO_TORCHVISION): model files import it, registry lookups call none of it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any


def vllm_support(architectures: list[str] | None) -> dict[str, bool | None]:
    from vllm.model_executor.models import ModelRegistry, registry
    from vllm.model_executor.models.interfaces import supports_eagle3

    registry._run_in_subprocess = lambda fn: fn()  # IN_PROCESS_REGISTRY
    found: dict[str, bool | None] = {}
    for arch in sorted(ModelRegistry.models) if architectures is None else architectures:
        if arch not in ModelRegistry.models:
            found[arch] = None
            continue
        cls = ModelRegistry._try_load_model_cls(arch)
        found[arch] = None if cls is None else bool(supports_eagle3(cls))
    return found


def declared_speculators() -> dict[str, str]:
    """Draft architecture → the method its model class declares
    (`speculator_config_class.base_method`, vLLM 0.34.0: a configured method other than it
    is refused, v1/worker/gpu/spec_decode/speculator_config.py:404-427), over the registry's
    speculative-decoding models; those that declare none are left out."""
    from vllm.model_executor.models import ModelRegistry, registry

    registry._run_in_subprocess = lambda fn: fn()  # IN_PROCESS_REGISTRY
    found: dict[str, str] = {}
    for arch in sorted(registry._SPECULATIVE_DECODING_MODELS):
        cls = ModelRegistry._try_load_model_cls(arch)
        declared = getattr(cls, "speculator_config_class", None)
        if declared is not None and declared.base_method is not None:
            found[arch] = declared.base_method
    return found


def registered(architectures: list[str]) -> dict[str, bool]:
    """Whether vLLM's registry lists each architecture at all (`ModelRegistry.models`, what
    `_ModelRegistry._raise_for_unsupported` refuses without)."""
    from vllm.model_executor.models import ModelRegistry

    return {arch: arch in ModelRegistry.models for arch in architectures}


def sglang_support(architectures: list[str] | None) -> dict[str, bool | None]:
    from sglang.srt.models.registry import ModelRegistry

    models: dict[str, Any] = ModelRegistry.models
    return {arch: (hasattr(models[arch], "set_eagle3_layers_to_capture")
                   if arch in models else None)
            for arch in (sorted(models) if architectures is None else architectures)}


def vllm(request: dict[str, Any]) -> Any:
    """The answer to a vLLM request: support, `registered` or `declared` speculators."""
    import vllm.config
    import vllm.model_executor.models  # noqa: F401
    from vllm_kv_plan import InertModules  # the harness folder is on sys.path

    # after the engine's core is imported, so that only the model files see it; once per
    # process (tests/engine/workers.py keeps one for the next request)
    if importlib.util.find_spec("torchvision") is None and not any(  # NO_TORCHVISION
            isinstance(finder, InertModules) for finder in sys.meta_path):
        sys.meta_path.append(InertModules("torchvision"))
    if request.get("registered"):
        return registered(request["architectures"])
    if request.get("declared"):
        return declared_speculators()
    return vllm_support(request.get("architectures"))


def sglang(request: dict[str, Any]) -> Any:
    from stand_ins import TorchvisionStandIn  # the harness folder is on sys.path

    if not any(isinstance(finder, TorchvisionStandIn) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionStandIn())
    return sglang_support(request.get("architectures"))


def main() -> None:
    here = __import__("pathlib").Path(__file__).resolve().parent
    # its stand-ins' modules: this folder's and the product's engine-side scripts
    sys.path[:0] = [str(here), str(here.parents[1] / "src/specpair/engines/harness")]
    request = json.loads(sys.stdin.read())
    print(json.dumps((vllm if request["engine"] == "vllm" else sglang)(request)))


if __name__ == "__main__":
    main()
