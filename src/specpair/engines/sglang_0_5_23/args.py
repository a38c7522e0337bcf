"""SGLang 0.5.23's server arguments for one pair, resolved once (sglang 0.5.23:
`srt/server_args.py::ServerArgs.resolve_once`, the pipeline in `srt/arg_groups/`).

Every default of this release that the launch passes and the budget reads is applied here
and nowhere else: the launch renders `ServerArgs`, the budget computes from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from specpair.engines.args_model import ServerArg
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23.facts import PROFILE
from specpair.facts.hardware import GPU
from specpair.model.budget import Line, MiB, line
from specpair.model.common import Method
from specpair.model.runbook import Speculation

ENGINE = PROFILE.label
SPEC_DEFAULT_MAX_RUNNING_REQUESTS = 48  # server_args.py: under speculation, when unset


@dataclass(frozen=True)
class ParserDefault:
    """How a release defaults a ratio that specpair's commands may leave unset."""

    parser: float | None
    """The parser's default (None: the parser has none and resolution sets it)."""
    resolved: float
    """What the release runs with when the command does not set it."""
    source: str

    def describe(self) -> str:
        if self.parser is None:
            return f"no parser default, resolved to {self.resolved:g} ({self.source})"
        return f"parser default {self.parser:g} ({self.source})"


@dataclass(frozen=True)
class Defaults:
    """What another release of this engine changes in the code this package follows: the
    label its rules cite, where its memory heuristic lives, and its parser defaults
    (sglang_0_5_18 passes its own; everything else is this release's code)."""

    engine: str
    memory_rule: str
    swa_full_tokens_ratio: ParserDefault
    mamba_full_memory_ratio: ParserDefault


DEFAULTS = Defaults(
    engine=ENGINE,
    memory_rule="arg_groups/memory_hook.py::handle_gpu_memory_settings",
    swa_full_tokens_ratio=ParserDefault(
        None, 0.8, "arg_groups/fields/schedule.py:150 Arg(fallback=0.8)"),
    mamba_full_memory_ratio=ParserDefault(
        None, 0.9, "arg_groups/fields/schedule.py:220 Arg(fallback=0.9)"))
DEFAULT_MAMBA_FULL_MEMORY_RATIO = DEFAULTS.mamba_full_memory_ratio.resolved


def verify_width(spec: Speculation) -> int:
    """`--speculative-num-draft-tokens` as 0.5.23 resolves it."""
    if spec.method is Method.DSPARK:
        assert spec.block_size is not None
        return spec.block_size + 1  # gamma + 1
    if spec.method is Method.DFLASH:
        assert spec.block_size is not None
        return spec.block_size  # the verify window is the block
    if spec.topk > 1:
        assert spec.num_draft_tokens is not None
        return spec.num_draft_tokens
    assert spec.num_speculative_tokens is not None
    return spec.num_speculative_tokens + 1


@dataclass(frozen=True)
class MemFraction:
    value: float
    lines: list[Line]


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """`cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes`."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256))
             + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


def default_mem_fraction(gpu_mem_mib: int, tp: int, pp: int, user_max_running: int | None,
                         use_mla: bool, defaults: Defaults = DEFAULTS) -> MemFraction:
    """`memory_hook.handle_gpu_memory_settings` for a text model on CUDA, defaults only."""
    gib = 1024
    if gpu_mem_mib < 20 * gib:
        chunked, max_bs = 2048, 8
    elif gpu_mem_mib < 35 * gib:
        chunked, max_bs = 4096, (48 if tp < 4 else 160)
    elif gpu_mem_mib < 60 * gib:
        chunked, max_bs = 4096, (32 if tp < 4 else 160)
    elif gpu_mem_mib < 160 * gib:
        chunked, max_bs = 8192, (256 if tp < 4 else 512)
    else:
        chunked, max_bs = 16384, 512
    if user_max_running is not None and max_bs > user_max_running:
        max_bs = user_max_running  # only a user-set value caps it; the spec default does not
    prefill_max = min(8192, chunked) if use_mla else chunked
    prefill_graphs = len(prefill_graph_sizes(prefill_max))
    graph = 2 * max_bs + (1.5 * 1024 if use_mla else 8 * prefill_graphs)
    reserved = 512 + max(chunked, 2048) * 1.5 + tp * pp / 8 * 1024 + graph
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    value = round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)
    rule = f"{defaults.engine} {defaults.memory_rule}"
    return MemFraction(value, [
        line(key="chunked_prefill_size", label="chunked prefill size (default)", value=chunked,
             unit="tokens", rule=f"by GPU memory {gpu_mem_mib} MiB; {rule}"),
        line(key="decode_graph_max_bs", label="decode CUDA-graph max batch", value=max_bs,
             unit="requests", rule="by GPU memory and TP; capped by a user-set "
                                   "--max-running-requests only"),
        line(key="reserved_mib", label="reserve for activations and graphs", value=reserved,
             unit="MiB", rule="512 + 1.5·max(chunked, 2048) + tp·pp/8·1024 + 2·decode_max_bs + "
                              + ("1536 (MLA prefill graphs)" if use_mla else
                                 f"8·{prefill_graphs} prefill graphs")
                              + "; at least 10240 on GPUs over 60 GiB"),
        line(key="mem_fraction_static", label="--mem-fraction-static (engine default)",
             value=value, unit="fraction", rule="round((gpu_mem − reserved) / gpu_mem, 3)"),
    ])


@dataclass(frozen=True)
class ServerArgs:
    mem_fraction_static: float
    mem_fraction_lines: tuple[Line, ...]
    """How the fraction was set: declared, or the engine's default heuristic step by step."""
    page_size: int
    max_running_requests: int
    """What the launch passes (the baseline keeps the speculative server's limit)."""
    num_draft_tokens: int | None
    """The verify width; None only for a runbook the loader would refuse."""
    cuda_graphs: bool
    defaulted: frozenset[str]
    swa_full_tokens_ratio: float | None
    """What the SWA pool is sized with; None for a target without local-attention layers."""
    mamba_full_memory_ratio: float | None
    """The state pool's share (passed explicitly); None for a target without linear
    attention."""
    defaults: Defaults = DEFAULTS

    def rows(self) -> list[ServerArg]:
        def row(key: str, label: str, flag: str, value: object, name: str) -> ServerArg:
            return ServerArg(key, label, flag, f"{value:g}" if isinstance(value, float)
                             else str(value), name in self.defaulted)
        return [
            row("memory_fraction", "memory fraction", "--mem-fraction-static",
                self.mem_fraction_static, "mem_fraction_static"),
            row("page_size", "KV page size (tokens)", "--page-size", self.page_size,
                "page_size"),
            row("max_running_requests", "running requests", "--max-running-requests",
                self.max_running_requests, "max_running_requests"),
            row("speculative_tokens", "verify width (draft tokens + 1)",
                "--speculative-num-draft-tokens", self.num_draft_tokens, "num_draft_tokens"),
            row("cuda_graphs", "CUDA graphs", "--cuda-graph-backend-decode disabled (off)",
                self.cuda_graphs, "cuda_graphs"),
            *(ServerArg(key, label, flag, f"{value:g}", name in self.defaulted,
                        default.describe())
              for key, label, flag, value, name, default in (
                  ("swa_full_tokens_ratio", "SWA pool tokens per full-pool token",
                   "--swa-full-tokens-ratio", self.swa_full_tokens_ratio,
                   "swa_full_tokens_ratio", self.defaults.swa_full_tokens_ratio),
                  ("mamba_full_memory_ratio", "state pool share of the KV memory",
                   "--mamba-full-memory-ratio", self.mamba_full_memory_ratio,
                   "mamba_full_memory_ratio", self.defaults.mamba_full_memory_ratio))
              if value is not None),
        ]


def _verify_width_or_none(spec: Speculation) -> int | None:
    if spec.method.is_block_drafter:
        return verify_width(spec)
    if spec.topk > 1:
        return spec.num_draft_tokens
    return None if spec.num_speculative_tokens is None else verify_width(spec)


def server_args(pair: EngineInput, gpu: GPU, defaults: Defaults = DEFAULTS) -> ServerArgs:
    dep = pair.runbook.deployment
    target = pair.target.geometry
    par = dep.parallel
    if dep.memory_fraction is not None:
        fraction = dep.memory_fraction
        lines: tuple[Line, ...] = (line(key="mem_fraction_static",
                                        label="--mem-fraction-static", value=fraction,
                                        unit="fraction", rule="declared in runbook"),)
    else:
        mf = default_mem_fraction(gpu.memory_bytes // MiB, par.tensor, par.pipeline,
                                  dep.max_running_requests, target.attention == "mla",
                                  defaults)
        fraction, lines = mf.value, tuple(mf.lines)
    defaulted = {name for name, value in (
        ("mem_fraction_static", dep.memory_fraction), ("page_size", dep.page_size),
        ("max_running_requests", dep.max_running_requests),
        ("swa_full_tokens_ratio", None),  # no runbook field: the release's default
        ("mamba_full_memory_ratio", dep.linear_state.full_memory_ratio)) if value is None}
    local = target.sliding_window_layers + target.chunked_attention_layers > 0
    return ServerArgs(
        mem_fraction_static=fraction, mem_fraction_lines=lines,
        page_size=dep.page_size or PROFILE.default_page_size,
        max_running_requests=dep.max_running_requests or SPEC_DEFAULT_MAX_RUNNING_REQUESTS,
        num_draft_tokens=_verify_width_or_none(pair.runbook.speculation),
        cuda_graphs=dep.cuda_graphs, defaulted=frozenset(defaulted),
        swa_full_tokens_ratio=defaults.swa_full_tokens_ratio.resolved if local else None,
        mamba_full_memory_ratio=(dep.linear_state.full_memory_ratio
                                 or defaults.mamba_full_memory_ratio.resolved)
        if target.linear_attention is not None else None, defaults=defaults)
