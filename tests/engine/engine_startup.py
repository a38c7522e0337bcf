"""Run an engine's own start-up validation on launch argv lists; print verdicts as JSON.

Run inside the engines session (see conftest.startup):

    python tests/engine/engine_startup.py sglang < cases.json
    PYTHONPATH=<a release's sources> python tests/engine/engine_startup.py vllm < cases.json

(tests/engine/releases.py: which folder holds which release.)

Input: a JSON list of {"argv": [...], "env": {...}, "files": {path: text}} (argv starting
with `sglang serve` or `vllm serve`, model paths pointing at folders that hold the real
config.json, no weights; `files`: what the command reads, written first). Output: a JSON list of
{"ok": bool, "stage": str, "error": str, "schedule": ...}: the speculation schedule the
engine runs after its own checks (vLLM: K per batch size from its lookup; SGLang: its
adaptive tiers), null where it runs none.

What runs is the engine's code, from argument parsing to the configuration it builds
before loading weights:

- vLLM 0.33.0 and 0.32.0: the parser `vllm serve` builds,
  `EngineArgs.from_cli_args(...).create_engine_config()` (ModelConfig, CacheConfig,
  ParallelConfig, SpeculativeConfig, VllmConfig checks).
  The folders hold no tokenizer, so `skip_tokenizer_init` is set; vLLM picks its CPU
  platform on this machine.
- SGLang 0.5.23: `prepare_server_args` (its parser), `ServerArgs.resolve_once()` (the
  resolution pipeline: speculative, memory, parallel hooks; 0.5.18 runs it while parsing,
  in `ServerArgs.__post_init__`), `check_server_args()`, then
  `ModelConfig.from_server_args` for the target and, as the draft worker does
  (draft_worker_common.py), for the draft at the target's context length.

Stubs, all for what a CPU-only machine lacks, nothing that decides a verdict:
- GPU_RUNTIME_STUB: SGLang's `get_device()` answers "cuda" and
  `get_device_memory_capacity()` the runbook GPU's memory (H100 80GB: 81,559 MiB), where
  the real functions raise "No accelerator" on this machine.
- CPU_TRITON_STUB (vLLM 0.34.0): its CPU platform's `check_and_update_config` refuses an
  x86 CPU without triton-cpu ("vLLM on x86 CPUs requires Triton", platforms/cpu.py:242),
  a check of the machine the config is built on, not of the command (specpair's commands
  are for CUDA); `vllm.triton_utils.HAS_TRITON` answers True there, so the VllmConfig
  checks after it (the extensible cache, the DFlash/DSpark cap) run. 0.33.0 and 0.32.0
  have no such check and are left as they are.
- TORCHVISION_IMPORT_STUB: `sglang.srt.configs` imports multimodal preprocessing
  (torchvision) at import time; the engines session has no torchvision (its CUDA build
  crashes beside the CPU torch), so an import-only stand-in answers those imports. Text
  models never call it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# the stand-ins the product's engine-side scripts share, from their folder
HARNESS = str(Path(__file__).resolve().parents[2] / "src" / "specpair" / "engines" / "harness")
if HARNESS not in sys.path:
    sys.path.insert(1, HARNESS)
from stand_ins import TorchvisionStandIn, cpu_triton_stub, gpu_runtime_stub  # noqa: E402


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()[:2000]


# --------------------------------------------------------------------------- vLLM


def vllm(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.cli.serve import make_arg_parser  # what `vllm serve` builds
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    cpu_triton_stub()
    results = []
    for case in cases:
        argv = case["argv"]
        assert argv[:2] == ["vllm", "serve"], argv[:2]
        write_files(case.get("files", {}))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                ns = parser.parse_args(["--model", argv[2], *argv[3:]])
            except SystemExit:
                lines = err.getvalue().strip().splitlines()
                results.append({"ok": False, "stage": "parser",
                                "error": lines[-1] if lines else "exit"})
                continue
        ns.skip_tokenizer_init = True  # the folders hold config.json only
        try:
            with environment(case.get("env", {})):
                config = EngineArgs.from_cli_args(ns).create_engine_config()
            results.append({"ok": True, "stage": "config", "error": "",
                            "schedule": _vllm_schedule(config)})
        except Exception as exc:  # the engine's verdict, whatever it raises
            results.append({"ok": False, "stage": "config", "error": _reason(exc)})
    return results


def _vllm_schedule(config: Any) -> list[int] | None:
    """K by batch size 1..max_num_seqs as the scheduler will look it up (the engine's own
    `build_dynamic_sd_schedule_lookup`), None where the engine runs no schedule (none
    given, or dropped by its config checks)."""
    spec = config.speculative_config
    if spec is None or not spec.num_speculative_tokens_per_batch_size:
        return None
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    lookup = build_dynamic_sd_schedule_lookup(
        spec.num_speculative_tokens_per_batch_size,
        vllm_max_batch_size=config.scheduler_config.max_num_seqs,
        vllm_num_speculative_tokens=spec.num_speculative_tokens)
    return list(lookup[1:])


def write_files(files: dict[str, str]) -> None:
    """The files a launch reads (Launch.files), where its command reads them."""
    for path, text in files.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


# --------------------------------------------------------------------------- SGLang


def sglang(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not any(isinstance(finder, TorchvisionStandIn) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionStandIn())  # once per process (workers.py)
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.server_args import prepare_server_args

    gpu_runtime_stub()
    results = []
    for case in cases:
        argv = case["argv"]
        assert argv[:2] == ["sglang", "serve"], argv[:2]
        write_files(case.get("files", {}))
        stage = "parser"
        err = io.StringIO()
        try:
            with environment(case.get("env", {})):
                with contextlib.redirect_stderr(err):
                    server_args = prepare_server_args(argv[2:])
                stage = "resolve"
                if hasattr(server_args, "resolve_once"):  # 0.5.18 resolves in __post_init__
                    server_args.resolve_once()
                stage = "check"
                server_args.check_server_args()
                stage = "target ModelConfig"
                target = ModelConfig.from_server_args(server_args)
                draft_path = server_args.speculative_draft_model_path
                if draft_path and draft_path != server_args.model_path:
                    stage = "draft ModelConfig"
                    ModelConfig.from_server_args(
                        server_args, model_path=draft_path, is_draft_model=True,
                        context_length=target.context_len)
            results.append({"ok": True, "stage": stage, "error": "",
                            "schedule": _sglang_schedule(server_args)})
        except SystemExit:
            lines = err.getvalue().strip().splitlines()
            results.append({"ok": False, "stage": stage, "error": lines[-1] if lines
                            else "exit"})
        except Exception as exc:  # the engine's verdict, whatever it raises
            results.append({"ok": False, "stage": stage, "error": _reason(exc)})
    return results


def _sglang_schedule(server_args: Any) -> dict[str, Any] | None:
    """The adaptive tiers the engine built (tier → candidate steps, and the steps it
    starts from), None where adaptive speculation is off after resolution."""
    from sglang.srt.arg_groups.overrides import resolved_view

    view = resolved_view(server_args)
    if not getattr(view, "speculative_adaptive", False):
        return None
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    params = AdaptiveSpeculativeParams(initial_steps=view.speculative_num_steps,
                                       cfg_path=view.speculative_adaptive_config)
    return {"tiers": {str(bs): slot.candidate_steps for bs, slot in params._slots.items()},
            "steps": view.speculative_num_steps,
            "draft_tokens": view.speculative_num_draft_tokens}


if __name__ == "__main__":
    engine = sys.argv[1]
    verdicts = {"sglang": sglang, "vllm": vllm}[engine](json.load(sys.stdin))
    print(json.dumps(verdicts))
