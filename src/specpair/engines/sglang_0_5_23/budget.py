"""SGLang 0.5.23: the KV pools as the engine sizes them, per GPU rank.

Follows, in order, what the engine does at start-up (the 0.5.23 wheel's
`srt/managers/scheduler.py::init_memory_pools`, `srt/arg_groups/memory_hook.py`,
`srt/mem_cache/kv_cache_configurator.py` and `srt/model_executor/pool_configurator.py`):

1. resolve `--mem-fraction-static` f (the user's, or the GPU-size heuristic);
2. measure P, the free memory before weights load (an assumption here);
3. load target weights, then the draft's: both are charged before the KV pool is sized;
4. rest = F − P·(1 − f), in GiB as the engine computes it;
5. a hybrid (linear-attention) target carves out its per-request state pool first;
6. tokens = int(rest · 2^30) // cell, page-aligned, where cell = target cell + draft cell
   (EAGLE family: layer scaling of the target cell; DFLASH/DSPARK: the draft's own
   geometry and KV dtype; NGRAM: none);
7. max_running_requests from the token count (and the state-slot cap).

This module resolves the inputs (steps 1-3) and assembles the budget table; the steps
after it are sibling modules: the pools of one scenario (4-7) `pool_sizing.py`, the
state pool (5) `state_pool.py`, the bytes per token (6) `kv_cells.py`.
"""

from __future__ import annotations

from specpair.engines.kv_arithmetic import kv_layers, pct, storage, weights_per_rank
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23 import schedule
from specpair.engines.sglang_0_5_23.args import DEFAULTS, Defaults, server_args, verify_width
from specpair.engines.sglang_0_5_23.kv_cells import pool_cells
from specpair.engines.sglang_0_5_23.pool_sizing import (
    Inputs,
    full_context_headroom,
    running_requests,
    size_pool,
)
from specpair.facts.hardware import GPU
from specpair.model.budget import Assumption, Budget, GiB, Line, Scenario, assumption, line

DEFAULT_OTHER_ALLOCATIONS = int(0.6 * GiB)


def reschedule(computed: Budget, pair: EngineInput, gpu: GPU) -> Budget | None:
    """`budget(pair, gpu)` from `computed`, the same pair's budget before its schedule was
    resolved: the schedule reaches this budget only through the verify width the pools are
    sized with (the schedule's largest candidate where the release runs it, `budget`), so
    with the same width it is the same budget, and otherwise None."""
    spec = pair.runbook.speculation
    if pair.schedule is None or spec.schedule is None or schedule.refusal(pair) is not None:
        return computed
    return computed if schedule.steps(pair) + 1 == verify_width(spec) else None


def recap(computed: Budget, pair: EngineInput, gpu: GPU, defaults: Defaults = DEFAULTS
          ) -> Budget | None:
    """`budget(pair, gpu, defaults)`, from `computed`, the budget of a pair that differs
    from `pair` in deployment.max_running_requests (and deployment.concurrency, which the
    budget does not read) alone; None where the cap decides more than this derives. The
    runbook's max_running_requests is read by `server_args` for two things: the default
    --mem-fraction-static (its decode-graph batch; a runbook that sets memory_fraction
    does not read it) and the max_running_requests each pool is sized with, which
    `size_pool` reads in `running_requests` and `full_context_headroom` only, but for a
    hybrid target, whose state pool (`state_plan`) it sizes too. So without a set fraction
    or with a state pool this is None, and otherwise each scenario's requests, their line
    and headroom are all that is computed again."""
    dep = pair.runbook.deployment
    if dep.memory_fraction is None or pair.target.geometry.linear_attention is not None:
        return None
    max_running = server_args(pair, gpu, defaults).max_running_requests

    def again(s: Scenario) -> Scenario:
        requests, requests_line = running_requests(max_running, s.max_total_tokens,
                                                   dep.context_length, None)
        assert s.state_slots is None
        return s.model_copy(update={
            "max_running_requests": requests,
            "full_context_headroom_bytes": full_context_headroom(
                s.max_total_tokens, requests, dep.context_length,
                s.cell_target + s.cell_draft),
            "lines": [requests_line if x.key == "max_running_requests" else x
                      for x in s.lines]})

    return computed.model_copy(update={
        "baseline": again(computed.baseline),
        "speculative": None if computed.speculative is None else again(computed.speculative),
        "fallback": None if computed.fallback is None else again(computed.fallback)})


def _assumptions(pair: EngineInput, gpu: GPU) -> tuple[list[Assumption], int, int]:
    """(their lines, P, other allocations): the memory the engine measures at start-up,
    as the runbook declares it or by default."""
    a = pair.runbook.deployment.assumptions
    p_bytes = a.free_before_load_bytes or gpu.free_before_load_bytes
    other = a.other_allocations_bytes if a.other_allocations_bytes is not None \
        else DEFAULT_OTHER_ALLOCATIONS
    assumptions = [
        assumption(
            key="free_before_load", label="P: free memory per rank before weights load",
            value=p_bytes, unit="B", source="declared in runbook" if a.free_before_load_bytes
            else f"default for {gpu.key} (measured by the engine at start-up: "
                 "'Memory baseline taken')"),
        assumption(
            key="other_allocations", label="other allocations before KV profiling",
            value=other, unit="B", source="declared in runbook"
            if a.other_allocations_bytes is not None
            else "specpair's assumption: 0.6 GiB; calibrate from the engine's start-up "
                 "log"),
    ]
    return assumptions, p_bytes, other


def _weights(pair: EngineInput) -> tuple[int, int, list[Line]]:
    """(target, draft, their lines): the weights per rank, both loaded before the KV pool
    is sized."""
    par = pair.runbook.deployment.parallel
    tp, pp = par.tensor, par.pipeline
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
    return wt, wd, weights


def budget(pair: EngineInput, gpu: GPU, defaults: Defaults = DEFAULTS) -> Budget:
    """The target alone, with the draft, and (where the engine may not resolve the draft's
    cell) the fallback, each sized in the engine's start-up order."""
    rb = pair.runbook
    dep = rb.deployment
    spec = rb.speculation
    attn_tp = dep.parallel.tensor  # attention DP is not used by specpair runbooks
    target, draft = pair.target.geometry, pair.draft.geometry if pair.draft else None
    assumptions, p_bytes, other = _assumptions(pair, gpu)

    args = server_args(pair, gpu, defaults)
    f, frac_lines = args.mem_fraction_static, list(args.mem_fraction_lines)
    # the limit the launch passes, to the speculative server and to its baseline alike
    max_running = args.max_running_requests
    wt, wd, weights = _weights(pair)

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
