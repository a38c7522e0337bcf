"""Parse launch argv lists with an engine's own argument parser; print the verdicts as JSON.

Run inside the engines session (where the engine packages are installed):

    python tests/engine/parse_argv.py sglang < argvs.json
    PYTHONPATH=<vllm 0.33.0 sources> python tests/engine/parse_argv.py vllm < argvs.json

Input: a JSON list of argv lists (each starting with the program, e.g. `sglang serve`).
Output: a JSON list of {"ok": bool, "error": str, "version": str, ...} in the same order.
The parser is built once per list, so each argv costs one parse; the tests call `sglang`,
`vllm` and `vllm_config` in a long-lived process per release (tests/engine/workers.py).
argparse exits on bad input; that exit is caught and its message kept.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[Any, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return parser.parse_args(argv), ""
        except SystemExit:
            return None, err.getvalue().strip().splitlines()[-1] if err.getvalue() else "exit"


def sglang(argvs: list[list[str]]) -> list[dict[str, Any]]:
    from stand_ins import TorchvisionStandIn  # the harness folder is on sys.path

    # 0.5.18's sglang.srt.utils imports torchvision at module level (TORCHVISION_IMPORT_STUB)
    if not any(isinstance(finder, TorchvisionStandIn) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionStandIn())  # once per process (workers.py)
    import sglang
    from sglang.srt.arg_groups.speculative_hook import _resolve_speculative_algorithm_alias
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    results = []
    for argv in argvs:
        assert argv[:2] == ["sglang", "serve"], argv[:2]
        ns, error = _parse(parser, argv[2:])
        result: dict[str, Any] = {"ok": ns is not None, "error": error,
                                  "version": sglang.__version__}
        if ns is not None and ns.speculative_algorithm is not None:
            try:
                # the start-up order: the alias (NEXTN → EAGLE) first, then the enum; no
                # draft path, so no Gemma-4 assistant lookup (it needs the hub)
                name = _resolve_speculative_algorithm_alias(ns.speculative_algorithm, None)
                result["algorithm"] = SpeculativeAlgorithm.from_string(name).name
            except ValueError as exc:
                result.update(ok=False, error=str(exc))
        results.append(result)
    return results


def vllm(argvs: list[list[str]]) -> list[dict[str, Any]]:
    import dataclasses

    import vllm
    from vllm.config.speculative import SpeculativeConfig
    from vllm.entrypoints.cli.serve import make_arg_parser  # what `vllm serve` builds
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    from pydantic import TypeAdapter, ValidationError

    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    annotations = {name: info.annotation for name, info in
                   SpeculativeConfig.__pydantic_fields__.items()}
    results = []
    for argv in argvs:
        assert argv[:2] == ["vllm", "serve"], argv[:2]
        ns, error = _parse(parser, ["--model", argv[2], *argv[3:]])
        result: dict[str, Any] = {"ok": ns is not None, "error": error,
                                  "version": vllm.__version__}
        if ns is not None:
            result["headless"] = bool(ns.headless)
            result["node_rank"] = ns.node_rank
        if ns is not None and ns.speculative_config:
            unknown = sorted(set(ns.speculative_config) - fields)
            if unknown:
                result.update(ok=False, error=f"unknown speculative-config keys {unknown}")
            # each value against the engine's own annotation of its field, strictly, as
            # the JSON it was written in (a JSON array is what a tuple field reads)
            for key, value in sorted(ns.speculative_config.items()):
                if key in annotations:
                    try:
                        TypeAdapter(annotations[key]).validate_json(json.dumps(value),
                                                                    strict=True)
                    except ValidationError as exc:
                        result.update(ok=False, error=f"{key}: {exc.errors()[0]['msg']}")
            result["speculative_config"] = ns.speculative_config
        results.append(result)
    return results


def vllm_config(argvs: list[list[str]]) -> list[dict[str, Any]]:
    """Parse, then build the engine's whole config as `vllm serve` does
    (AsyncEngineArgs.from_cli_args(...).create_engine_config()): every SpeculativeConfig
    and VllmConfig validation runs, no weights load. Checkpoint paths must exist."""
    import vllm
    from stand_ins import cpu_triton_stub  # the harness folder is on sys.path
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.cli.serve import make_arg_parser  # what `vllm serve` builds
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    cpu_triton_stub()  # 0.34.0's CPU platform check of this machine (stand_ins.py)
    results = []
    for argv in argvs:
        ns, error = _parse(parser, ["--model", argv[2], *argv[3:]])
        result: dict[str, Any] = {"ok": ns is not None, "error": error,
                                  "version": vllm.__version__}
        if ns is not None:
            try:
                AsyncEngineArgs.from_cli_args(ns).create_engine_config()
            except Exception as exc:  # the engine's verdict, whatever its type
                result.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        results.append(result)
    return results


if __name__ == "__main__":
    # the stand-ins it imports: src/specpair/engines/harness/stand_ins.py
    sys.path.insert(1, str(Path(__file__).resolve().parents[2] / "src/specpair/engines/harness"))
    engine = sys.argv[1]
    argvs = json.load(sys.stdin)
    verdicts = {"sglang": sglang, "vllm": vllm, "vllm-config": vllm_config}[engine](argvs)
    print(json.dumps(verdicts))
