"""Stand-ins for what a CPU-only machine lacks, shared by the engine-side scripts (and the
tests' start-up validation, tests/engine/engine_startup.py); none decides a number.

- GPU_RUNTIME_STUB: SGLang's `get_device()` answers "cuda" and
  `get_device_memory_capacity()` an H100 80GB's memory (81,559 MiB), where the real
  functions raise "No accelerator" on this machine.
- CPU_TRITON_STUB (vLLM 0.34.0): its CPU platform's `check_and_update_config` refuses an
  x86 CPU without triton-cpu ("vLLM on x86 CPUs requires Triton", platforms/cpu.py:242),
  a check of the machine the config is built on, not of the command (specpair's commands
  are for CUDA); `vllm.triton_utils.HAS_TRITON` answers True there. 0.33.0 and 0.32.0
  have no such check and are left as they are.
- TORCHVISION_IMPORT_STUB: `sglang.srt.configs` imports multimodal preprocessing
  (torchvision) at import time; an environment without torchvision (its CUDA build
  crashes beside a CPU torch) gets an import-only stand-in for those imports. Text models
  never call it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import types
from typing import Any

H100_MIB = 81559.0


class _Anything(type):
    """TORCHVISION_IMPORT_STUB: any attribute of a stand-in module is a stand-in class."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})


class TorchvisionStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0"  # transformers parses it; no real torchvision is this old
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def gpu_runtime_stub() -> None:
    """GPU_RUNTIME_STUB: the device and its memory, as an H100 80GB node reports them, in
    every module of the release that imported the functions by name (0.5.23: its
    arg_groups hooks; 0.5.18: server_args itself)."""
    import importlib
    import importlib.util

    for name in ("sglang.srt.utils.common", "sglang.srt.server_args",
                 "sglang.srt.arg_groups.serving_hook", "sglang.srt.arg_groups.kv_shard_hook",
                 "sglang.srt.arg_groups.memory_hook"):
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        if hasattr(module, "get_device"):
            module.get_device = lambda *args, **kwargs: "cuda"  # type: ignore[attr-defined]
        if hasattr(module, "get_device_memory_capacity"):
            module.get_device_memory_capacity = (  # type: ignore[attr-defined]
                lambda device=None: H100_MIB)


def cpu_triton_stub() -> None:
    """CPU_TRITON_STUB, only for a release whose CPU platform has the x86 Triton check."""
    import inspect

    import vllm.triton_utils
    from vllm.platforms.cpu import CpuPlatform

    if "requires Triton (triton-cpu)" in inspect.getsource(CpuPlatform.check_and_update_config):
        vllm.triton_utils.HAS_TRITON = True  # type: ignore[attr-defined]
