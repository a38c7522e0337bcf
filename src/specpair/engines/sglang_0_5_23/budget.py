"""SGLang 0.5.23: the KV pools as the engine sizes them, per GPU rank.

Follows, in order, what the engine does at start-up (ENGINE_NOTES_SGLANG.md §4,
ENGINE_NOTES_SGLANG_HYBRID.md, and the 0.5.23 wheel's `arg_groups/memory_hook.py` and
`mem_cache/kv_cache_configurator.py`):

1. resolve `--mem-fraction-static` f (the user's, or the GPU-size heuristic);
2. measure P, the free memory before weights load (an assumption here);
3. load target weights, then the draft's: both are charged before the KV pool is sized;
4. rest = F − P·(1 − f), in GiB as the engine computes it;
5. a hybrid (linear-attention) target carves out its per-request state pool first;
6. tokens = int(rest · 2^30) // cell, page-aligned, where cell = target cell + draft cell
   (EAGLE family: layer scaling of the target cell; DFLASH/DSPARK: the draft's own
   geometry and KV dtype; NGRAM: none);
7. max_running_requests from the token count (and the state-slot cap).

Float arithmetic mirrors the engine's (GiB floats, then `int(x · 2^30)`) so that token
counts match it to the token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specpair.engines.kv_arithmetic import kv_layers, pct, storage, weights_per_rank
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23 import schedule
from specpair.engines.sglang_0_5_23.args import (
    DEFAULTS,
    SPEC_DEFAULT_MAX_RUNNING_REQUESTS,
    Defaults,
    server_args,
    verify_width,
)
from specpair.engines.sglang_0_5_23.kv_cells import SwaSplit, pool_cells
from specpair.engines.sglang_0_5_23.state_pool import StatePlan, state_plan
from specpair.facts.hardware import GPU
from specpair.model.budget import Assumption, Budget, GiB, Line, Scenario, assumption, line
from specpair.model.geometry import Geometry
from specpair.model.runbook import Runbook

DEFAULT_OTHER_ALLOCATIONS = int(0.6 * GiB)


def pool_tokens(available: int, cell: int, swa: SwaSplit | None, page_size: int
                ) -> tuple[int, int | None]:
    """`calculate_pool_sizes`: (full-pool tokens, SWA-pool tokens or None)."""
    if swa is not None:
        # the hybrid configurator's cell is a float: int(available // cell), page-aligned
        tokens = int(available // (cell + swa.ratio * swa.cell)) // page_size * page_size
        return tokens, int(tokens * swa.ratio) // page_size * page_size
    tokens = available // cell if cell else 0
    return tokens // page_size * page_size, None


# --------------------------------------------------------------------------- budget


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


def _requests(max_running: int | None, tokens: int, context_length: int,
              plan: StatePlan | None) -> tuple[int, Line]:
    """`resolve_max_num_reqs`: the running requests a pool of `tokens` takes, and its
    line (the part of `size_pool` that reads max_running_requests, with `_headroom`)."""
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


def _headroom(tokens: int, requests: int, context_length: int, cell: int) -> int:
    return (tokens - requests * context_length) * cell


def size_pool(name: str, inputs: Inputs, cell_t: int, cell_d: int, rb: Runbook | None = None,
              target: Geometry | None = None, attn_tp: int = 1, speculative: bool = False,
              verify: int = 1, extra_lines: list[Line] | None = None,
              swa: SwaSplit | None = None, defaults: Defaults = DEFAULTS) -> Scenario:
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
    requests, requests_line = _requests(max_running, tokens, inputs.context_length, plan)
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
    needed_f = 1 - free_gib / p_gib  # rest > 0 takes f above this
    if rest <= 0 and free_gib <= 0:
        verdict = (f"does not fit: the weights do not fit: with the other allocations they "
                   f"need {used / GiB:.1f} GiB per rank, {-free_gib:.1f} GiB more than the "
                   f"{p_gib:.1f} GiB free before load, so no --mem-fraction-static leaves "
                   "memory for the KV cache; use more tensor-parallel ranks or a larger GPU")
    elif rest <= 0:
        verdict = ("does not fit: weights leave no memory for the KV cache under "
                   f"--mem-fraction-static={f}; raise it above "
                   f"{math.ceil(needed_f * 1000) / 1000:.3f}")
    elif tokens < inputs.context_length:
        verdict = (f"does not fit: {tokens} tokens cannot hold one request at the context "
                   f"length {inputs.context_length}")
    else:
        verdict = f"fits: {tokens // inputs.context_length} full-context sequences"
    headroom = _headroom(tokens, requests, inputs.context_length, cell)
    return Scenario(
        name=name, cell_target=cell_t, cell_draft=cell_d, kv_budget_bytes=available,
        state_pool_bytes=plan.pool_bytes if plan else 0,
        state_slots=plan.slots if plan else None, max_total_tokens=tokens,
        cell_swa=swa.cell if swa is not None else 0, swa_tokens=swa_tokens,
        max_running_requests=requests,
        sequences_at_context=tokens // inputs.context_length,
        target_kv_bytes=tokens * cell_t, draft_kv_bytes=tokens * cell_d,
        full_context_headroom_bytes=headroom, fits=fits, verdict=verdict, lines=lines)


def recap(computed: Budget, pair: EngineInput, gpu: GPU, defaults: Defaults = DEFAULTS
          ) -> Budget | None:
    """`budget(pair, gpu, defaults)`, from `computed`, the budget of a pair that differs
    from `pair` in deployment.max_running_requests (and deployment.concurrency, which the
    budget does not read) alone; None where the cap decides more than this derives. The
    runbook's max_running_requests is read by `server_args` for two things: the default
    --mem-fraction-static (its decode-graph batch; a runbook that sets memory_fraction
    does not read it) and the max_running_requests each pool is sized with, which
    `size_pool` reads in `_requests` and `_headroom` only, but for a hybrid target, whose
    state pool (`state_plan`) it sizes too. So without a set fraction or with a state pool
    this is None, and otherwise each scenario's requests, their line and headroom are all
    that is computed again."""
    dep = pair.runbook.deployment
    if dep.memory_fraction is None or pair.target.geometry.linear_attention is not None:
        return None
    max_running = server_args(pair, gpu, defaults).max_running_requests

    def again(s: Scenario) -> Scenario:
        requests, requests_line = _requests(max_running, s.max_total_tokens,
                                            dep.context_length, None)
        assert s.state_slots is None
        return s.model_copy(update={
            "max_running_requests": requests,
            "full_context_headroom_bytes": _headroom(s.max_total_tokens, requests,
                                                     dep.context_length,
                                                     s.cell_target + s.cell_draft),
            "lines": [requests_line if x.key == "max_running_requests" else x
                      for x in s.lines]})

    return computed.model_copy(update={
        "baseline": again(computed.baseline),
        "speculative": None if computed.speculative is None else again(computed.speculative),
        "fallback": None if computed.fallback is None else again(computed.fallback)})


def budget(pair: EngineInput, gpu: GPU, defaults: Defaults = DEFAULTS) -> Budget:
    rb = pair.runbook
    dep = rb.deployment
    spec = rb.speculation
    tp, pp = dep.parallel.tensor, dep.parallel.pipeline
    attn_tp = tp  # attention DP is not used by specpair runbooks
    target, draft = pair.target.geometry, pair.draft.geometry if pair.draft else None

    assumptions: list[Assumption] = []
    a = dep.assumptions
    p_bytes = a.free_before_load_bytes or gpu.free_before_load_bytes
    other = a.other_allocations_bytes if a.other_allocations_bytes is not None \
        else DEFAULT_OTHER_ALLOCATIONS
    assumptions.append(assumption(
        key="free_before_load", label="P: free memory per rank before weights load",
        value=p_bytes, unit="B", source="declared in runbook" if a.free_before_load_bytes
        else f"default for {gpu.key} (measured by the engine at start-up: "
             "'Memory baseline taken')"))
    assumptions.append(assumption(
        key="other_allocations", label="other allocations before KV profiling", value=other,
        unit="B", source="declared in runbook" if a.other_allocations_bytes is not None
        else "default 0.6 GiB (ENGINE_NOTES_SGLANG §4.8)"))

    args = server_args(pair, gpu, defaults)
    f, frac_lines = args.mem_fraction_static, list(args.mem_fraction_lines)
    # the limit the launch passes, to the speculative server and to its baseline alike
    max_running = args.max_running_requests

    wt = weights_per_rank(pair.target_own_weight_bytes,
                          pair.target.weights.replicated_bytes, tp * pp)
    wd = weights_per_rank(pair.draft.weights.weight_bytes, pair.draft.weights.replicated_bytes,
                          tp) if pair.draft else 0
    weights = [
        line(key="target_weights", label="target weights per rank", value=wt, unit="B",
             rule=f"(weight bytes − replicated) / (tp·pp = {tp * pp}) + replicated"
                  + ("; the bundled draft's tensors are loaded by the draft runner"
                     if pair.bundled_draft else "")),
        line(key="draft_weights", label="draft weights per rank", value=wd, unit="B",
             rule=f"draft layers sharded over tp = {tp}; replicated parts (fc, Markov head) "
                  "whole on every rank"),
    ]

    cells = pool_cells(pair, defaults)
    cell_t, swa = cells.cell_target, cells.swa
    page = args.page_size
    base_inputs = Inputs(p_bytes, wt, 0, other, f, page, dep.context_length, max_running)
    cell_line = line(key="cell_target", label="target KV bytes per token", value=cell_t,
                     unit="B", rule=f"{cells.target_rule}; kv dtype "
                                    f"{dep.kv_cache_dtype.value}; "
                                    "pool_configurator.py::_compute_cell_size")
    baseline = size_pool("target alone", base_inputs, cell_t, 0, rb, target, attn_tp,
                         False, 1, frac_lines + [cell_line], cells.baseline_swa, defaults)

    spec_inputs = Inputs(p_bytes, wt, wd, other, f, page, dep.context_length, max_running)
    verify = verify_width(spec)
    if pair.schedule is not None and spec.schedule is not None and schedule.refusal(pair) is None:
        verify = schedule.steps(pair) + 1  # adaptive: sized for the largest candidate
    fallback = None
    if cells.fallback_draft is not None:
        layers_t, fb_cell = cells.target_layers, cells.fallback_draft
        assert draft is not None
        fallback = size_pool(
            "fallback: draft cell unresolved", spec_inputs, cell_t, fb_cell, rb, target,
            attn_tp, True, verify, frac_lines + [cell_line, line(
                key="cell_draft", label="draft KV bytes per token (fallback)", value=fb_cell,
                unit="B", rule=f"ceil(cell_t · ({layers_t} + {kv_layers(draft)}) / "
                               f"{layers_t}) − cell_t: layer-count scaling when the engine "
                               "cannot read the draft config")], defaults=defaults)
    note = cells.note
    if cells.draft_rule is None:
        scenario = size_pool("with NGRAM (no draft KV)", spec_inputs, cell_t, 0, rb, target,
                             attn_tp, True, verify, frac_lines + [cell_line], swa, defaults)
    else:
        scenario = size_pool(
            f"with the {spec.method.value} draft", spec_inputs, cell_t, cells.cell_draft, rb,
            target, attn_tp, True, verify, frac_lines + [cell_line, line(
                key="cell_draft", label="draft KV bytes per token",
                value=cells.cell_draft, unit="B", rule=cells.draft_rule)], swa, defaults)
    lost = pct(baseline.max_total_tokens - scenario.max_total_tokens,
               baseline.max_total_tokens)
    share = pct(scenario.cell_draft, scenario.cell_total)
    return Budget(
        engine=defaults.engine, gpu=gpu.key, assumptions=assumptions, weights=weights,
        baseline=baseline, speculative=scenario, fallback=fallback, draft_pool_note=note,
        capacity_lost_pct=lost, draft_share_of_kv_pct=share, storage=storage(pair))
