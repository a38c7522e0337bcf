"""vLLM's own sharding of the MoE layers for launch argv lists (run by
tests/engine/test_moe_parallel_oracle.py), in whichever release `vllm` imports as.

Each case is a `vllm serve` argv. vLLM's own `vllm serve` parser reads it; its
`ParallelConfig` is built from the parsed tensor, data and expert-parallel settings; and
`make_parallel_config`, which every `FusedMoE` layer calls in its constructor (it calls
`FusedMoEParallelConfig.make`), gives the MoE layers' tensor and expert-parallel sizes.
The layer passes it the process group's world sizes, which are the parallel config's.

Stand-in, because no process group exists here: `make` asks the distributed state for
this process's data-parallel and tensor-parallel *ranks* (`get_dp_group`,
`get_tensor_model_parallel_rank`); the sizes, which are all the test reads, come from its
arguments and the parallel config alone. The stand-ins answer rank 0.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
import types
from typing import Any

_PARSER: Any = None


def _set_up() -> Any:
    global _PARSER
    if _PARSER is None:
        import vllm.model_executor.layers.fused_moe.config as moe_config
        from vllm.entrypoints.cli.serve import make_arg_parser  # what `vllm serve` builds
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        moe_config.get_dp_group = lambda: types.SimpleNamespace(rank_in_group=0)
        moe_config.get_tensor_model_parallel_rank = lambda: 0
        _PARSER = make_arg_parser(FlexibleArgumentParser())
    return _PARSER


def sharding(argv: list[str]) -> dict[str, Any]:
    import vllm
    from vllm.config import ParallelConfig
    from vllm.model_executor.layers.fused_moe.layer import make_parallel_config

    parser = _set_up()
    assert argv[:2] == ["vllm", "serve"], argv[:2]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        ns = parser.parse_args(["--model", argv[2], *argv[3:]])
    parallel = ParallelConfig(tensor_parallel_size=ns.tensor_parallel_size,
                              data_parallel_size=ns.data_parallel_size,
                              pipeline_parallel_size=ns.pipeline_parallel_size,
                              enable_expert_parallel=ns.enable_expert_parallel)
    moe = make_parallel_config(parallel.tensor_parallel_size, parallel.data_parallel_size,
                               parallel.prefill_context_parallel_size, False, parallel)
    return {"ok": True, "version": vllm.__version__,
            "tensor": ns.tensor_parallel_size, "data": ns.data_parallel_size,
            "enable_expert_parallel": bool(ns.enable_expert_parallel),
            "moe_tp_size": moe.tp_size, "moe_ep_size": moe.ep_size, "use_ep": moe.use_ep}


def batch(argvs: list[list[str]]) -> list[dict[str, Any]]:
    results = []
    for argv in argvs:
        try:
            results.append(sharding(argv))
        except BaseException as error:  # argparse exits; each case reports its own error
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}",
                            "trace": traceback.format_exc(limit=8)[-3000:]})
    return results


if __name__ == "__main__":
    print(json.dumps(batch(json.load(sys.stdin))))
