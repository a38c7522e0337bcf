"""SGLang 0.5.23: one scenario's pools sized from the memory left after the weights
(steps 4-7 of `budget.py`): the rest F − P·(1 − f), a hybrid's state pool, the token pools
of the per-token cells (`kv_cells.py`), and the running requests they take
(`mem_cache/kv_cache_configurator.py`).

Float arithmetic mirrors the engine's (GiB floats, then `int(x · 2^30)`) so that token
counts match it to the token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specpair.engines.sglang_0_5_23.args import (
    DEFAULTS,
    SPEC_DEFAULT_MAX_RUNNING_REQUESTS,
    Defaults,
)
from specpair.engines.sglang_0_5_23.kv_cells import SwaSplit
from specpair.engines.sglang_0_5_23.state_pool import StatePlan, state_plan
from specpair.model.budget import GiB, Line, Scenario, line
from specpair.model.geometry import Geometry
from specpair.model.runbook import Runbook


def pool_tokens(available: int, cell: int, swa: SwaSplit | None, page_size: int
                ) -> tuple[int, int | None]:
    """`calculate_pool_sizes`: (full-pool tokens, SWA-pool tokens or None)."""
    if swa is not None:
        # the hybrid configurator's cell is a float: int(available // cell), page-aligned
        tokens = int(available // (cell + swa.ratio * swa.cell)) // page_size * page_size
        return tokens, int(tokens * swa.ratio) // page_size * page_size
    tokens = available // cell if cell else 0
    return tokens // page_size * page_size, None


@dataclass(frozen=True)
class Inputs:
    """Everything the pool sizing depends on, per rank; tests build these directly."""

    free_before_load: int
    target_weights: int
    draft_weights: int
    other_allocations: int
    mem_fraction: float
    page_size: int
    context_length: int
    max_running_requests: int | None


def running_requests(max_running: int | None, tokens: int, context_length: int,
                     plan: StatePlan | None) -> tuple[int, Line]:
    """`resolve_max_num_reqs`: the running requests a pool of `tokens` takes, and its
    line (the part of `size_pool` that reads max_running_requests, with
    `full_context_headroom`)."""
    if max_running is not None:
        requests = min(max(1, max_running), tokens // 2)
        req_rule = f"min(max_running_requests {max_running}, tokens // 2)"
    else:
        estimated = max(min(int(tokens / context_length * 512), 4096), 2048)
        requests = min(estimated, tokens // 2)
        req_rule = "min(clamp(int(tokens / context · 512), 2048, 4096), tokens // 2)"
    if plan is not None:
        requests = min(requests, plan.slots // plan.ratio)
        req_rule += f", capped by state slots K // {plan.ratio}"
    return requests, line(key="max_running_requests", label="max running requests",
                          value=requests, unit="requests",
                          rule=f"{req_rule}; kv_cache_configurator.py::resolve_max_num_reqs")


def full_context_headroom(tokens: int, requests: int, context_length: int, cell: int) -> int:
    """Pool bytes left once every running request holds the full context (negative where
    the pool cannot hold them all)."""
    return (tokens - requests * context_length) * cell


def size_pool(name: str, inputs: Inputs, cell_t: int, cell_d: int, rb: Runbook | None = None,
              target: Geometry | None = None, attn_tp: int = 1, speculative: bool = False,
              verify: int = 1, extra_lines: list[Line] | None = None,
              swa: SwaSplit | None = None, defaults: Defaults = DEFAULTS) -> Scenario:
    """One scenario in the engine's start-up order: the rest after the weights and the
    slack, a hybrid's state pool out of it, then the token pools and running requests."""
    p_gib = inputs.free_before_load / GiB
    f = inputs.mem_fraction
    used = inputs.target_weights + inputs.draft_weights + inputs.other_allocations
    free_gib = (inputs.free_before_load - used) / GiB
    rest = free_gib - p_gib * (1 - f)
    max_running = inputs.max_running_requests
    if max_running is None and speculative:
        max_running = SPEC_DEFAULT_MAX_RUNNING_REQUESTS
    lines = list(extra_lines or [])
    lines += [
        line(key="free_after_weights", label="F: free memory after weights load",
             value=int(free_gib * GiB), unit="B", rule="P − target weights − draft weights − "
             "other allocations; draft weights load before the KV pool is sized"),
        line(key="slack", label="slack P·(1 − f) for activations and CUDA graphs",
             value=int(p_gib * (1 - f) * GiB), unit="B",
             rule="kv_cache_configurator.py::_profile_available_bytes"),
        line(key="rest", label="rest = F − P·(1 − f)", value=int(rest * GiB), unit="B",
             rule="the budget of the token pools (and a hybrid's state pool)"
             + ("; negative: nothing is left for the KV cache" if rest <= 0 else "")),
    ]
    if free_gib <= 0:
        lines[-3] = lines[-3].model_copy(update={
            "rule": lines[-3].rule + "; negative: the weights do not fit in GPU memory"})
    plan: StatePlan | None = None
    if target is not None and target.linear_attention is not None and rb is not None and rest > 0:
        rest, plan = state_plan(rb, target, attn_tp, rest, speculative, verify,
                                max_running or 1, defaults)
        lines += plan.lines
    cell = cell_t + cell_d
    available = int(rest * (1 << 30)) if rest > 0 else 0
    tokens, swa_tokens = pool_tokens(available, cell, swa, inputs.page_size)
    requests, requests_line = running_requests(max_running, tokens, inputs.context_length,
                                               plan)
    lines += [
        line(key="kv_available", label="bytes for the token pools", value=available, unit="B",
             rule="int(rest · 2^30)" + (" after the state pool" if plan else "")),
        line(key="cell", label="bytes per token (target + draft)", value=cell, unit="B",
             rule="both pools hold the same token count (shared slot index space)"),
    ]
    if swa is not None:
        lines += [
            line(key="cell_swa", label="sliding-layer bytes per SWA token", value=swa.cell,
                 unit="B", rule=swa.rule),
            line(key="swa_tokens", label="SWA pool tokens", value=swa_tokens or 0,
                 unit="tokens", rule=f"int(full tokens · {swa.ratio}), page-aligned"),
        ]
    lines += [
        line(key="max_total_tokens", label="token capacity", value=tokens, unit="tokens",
             rule=(f"int(available // (cell + {swa.ratio} · cell_swa))" if swa is not None
                   else "available // cell") + f", aligned down to page size "
                                               f"{inputs.page_size}"),
        requests_line,
    ]
    fits = rest > 0 and tokens >= inputs.context_length and (plan is None or plan.slots > 0)
    verdict = _verdict(inputs, p_gib, used, free_gib, rest, tokens)
    headroom = full_context_headroom(tokens, requests, inputs.context_length, cell)
    return Scenario(
        name=name, cell_target=cell_t, cell_draft=cell_d, kv_budget_bytes=available,
        state_pool_bytes=plan.pool_bytes if plan else 0,
        state_slots=plan.slots if plan else None, max_total_tokens=tokens,
        cell_swa=swa.cell if swa is not None else 0, swa_tokens=swa_tokens,
        max_running_requests=requests,
        sequences_at_context=tokens // inputs.context_length,
        target_kv_bytes=tokens * cell_t, draft_kv_bytes=tokens * cell_d,
        full_context_headroom_bytes=headroom, fits=fits, verdict=verdict, lines=lines)


def _verdict(inputs: Inputs, p_gib: float, used: int, free_gib: float, rest: float,
             tokens: int) -> str:
    """Whether the scenario fits and, where it does not, what to change."""
    f = inputs.mem_fraction
    needed_f = 1 - free_gib / p_gib  # rest > 0 takes f above this
    if rest <= 0 and free_gib <= 0:
        return (f"does not fit: the weights do not fit: with the other allocations they "
                f"need {used / GiB:.1f} GiB per rank, {-free_gib:.1f} GiB more than the "
                f"{p_gib:.1f} GiB free before load, so no --mem-fraction-static leaves "
                "memory for the KV cache; use more tensor-parallel ranks or a larger GPU")
    if rest <= 0:
        return ("does not fit: weights leave no memory for the KV cache under "
                f"--mem-fraction-static={f}; raise it above "
                f"{math.ceil(needed_f * 1000) / 1000:.3f}")
    if tokens < inputs.context_length:
        return (f"does not fit: {tokens} tokens cannot hold one request at the context "
                f"length {inputs.context_length}")
    return f"fits: {tokens // inputs.context_length} full-context sequences"
