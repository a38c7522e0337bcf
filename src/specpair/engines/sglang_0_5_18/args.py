"""SGLang 0.5.18's server arguments: 0.5.23's resolution (the same memory heuristic, page
size and running-request default, facts.DIFFERENCES) with this release's defaults."""

from __future__ import annotations

from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_18.facts import PROFILE
from specpair.engines.sglang_0_5_23 import args as base
from specpair.engines.sglang_0_5_23.args import Defaults, ParserDefault, ServerArgs
from specpair.facts.hardware import GPU

# paths in the sglang-0.5.18 wheel, under sglang/srt/
DEFAULTS = Defaults(
    engine=PROFILE.label,
    memory_rule="server_args.py::ServerArgs._handle_gpu_memory_settings",
    swa_full_tokens_ratio=ParserDefault(0.8, 0.8, "server_args.py:901"),
    mamba_full_memory_ratio=ParserDefault(0.9, 0.9, "server_args.py:2562"))


def server_args(pair: EngineInput, gpu: GPU) -> ServerArgs:
    return base.server_args(pair, gpu, DEFAULTS)
