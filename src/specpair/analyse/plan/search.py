"""`specpair plan`: every candidate through the planner, ranked, with the runbook as written
evaluated the same way and the assumptions the plan rests on."""

from __future__ import annotations

import time

from specpair.analyse.acceptance import shape_depth
from specpair.analyse.plan.candidates import BASELINE, DeploymentChoice, deployment_choices, shapes
from specpair.analyse.plan.evaluators import Evaluator
from specpair.analyse.plan.options import Options
from specpair.analyse.plan.paired import compare, paired_bands
from specpair.analyse.plan.planner import Planner, Stats
from specpair.analyse.plan.ranking import best_first, dedupe, front, ranked, recommend
from specpair.analyse.plan.results import Comparison, Counts, Plan, Row
from specpair.analyse.step_inputs import (
    not_modelled_text,
    unmodelled,
)
from specpair.engines import verified_layouts
from specpair.facts import hardware
from specpair.resolve.pair import ResolvedPair


def plan(pair: ResolvedPair, opts: Options | None = None) -> Plan:
    """The plan of `pair`: every candidate evaluated, what passes ranked best first."""
    opts = opts or Options()
    started = time.perf_counter()
    planner = Planner(pair, opts)
    rows: list[Row] = []
    evaluators: dict[str, tuple[Evaluator, Row]] = {}
    seen_deployments: set[DeploymentChoice] = set()
    all_shapes = [BASELINE, *shapes(pair)]
    for d, s in planner.candidates():
        seen_deployments.add(d)
        row = planner.evaluate(d, s)
        if row is not None:
            rows.append(row)
    best, order = best_first(dedupe(ranked(planner.mode, rows)))
    good = [r for r in order if r.passes_check]
    rest = [r for r in order if not r.passes_check]
    recommended, against = (None, None) if best is None else recommend(
        planner.mode, best, good, lambda a, b: _against(planner, a, b))
    # the front is drawn from what passes
    for r in good:
        evaluators[r.key] = (planner.evaluators[r.key], r)
    drawn = front(planner.mode, evaluators)
    current = _current(planner)
    elapsed = time.perf_counter() - started
    st = planner.stats
    counts = Counts(candidates=st.candidates, deployments=len(seen_deployments),
                    shapes=len(all_shapes), refused_by_engine=sum(st.refusals.values()),
                    over_budget=st.over_budget,
                    beyond_measured_depth=st.beyond, no_operating_point=st.no_point,
                    fail_other_rules=st.other, ranked=len(good), not_modelled=st.not_modelled)
    refusal = unmodelled(pair)
    t = planner.targets
    return Plan(
        pair=pair.name, runbook=pair.source_file, engine=pair.engine, mode=planner.mode,
        concurrency_source=planner.concurrency_source,
        targets={"tpot_ms": t.tpot_ms, "ttft_ms": t.ttft_ms,
                 "concurrency": planner.concurrency, "rate": t.rate},
        gpus=planner.gpus, max_gpus=planner.max_gpus,
        acceptance_source=planner.curve.source, slo_source=planner.slo_curve.source,
        expected_context=planner.context, prompt_tokens=planner.prompt,
        output_tokens=planner.output, rows=good + rest, front=drawn, best=best,
        context_length=pair.runbook.deployment.context_length, recommended=recommended,
        recommended_against=against,
        best_speculative=next((r for r in good if r.depth > 0), None), current=current,
        current_not_modelled=None if refusal is None else not_modelled_text(refusal),
        counts=counts, refusals=dict(sorted(st.refusals.items())), seconds=round(elapsed, 3),
        ms_per_candidate=round(1e3 * elapsed / max(1, st.candidates), 2),
        assumptions=_assumptions(planner), unverified=verified_layouts.declared_notes(pair))


def _against(planner: Planner, a: Row, b: Row) -> Comparison:
    """`a` against `b` under the model that scored both (`paired.compare`)."""
    ev_a, ev_b = planner.evaluators[a.key], planner.evaluators[b.key]
    gpu = hardware.lookup(a.gpu)
    bands = paired_bands(gpu.family if gpu is not None else None,
                         planner.pair.runbook.engine.name.value)
    per_gpu = compare(a, b, ev_a, ev_b, a.tokens_per_s_per_gpu, b.tokens_per_s_per_gpu, bands)
    per_req = compare(a, b, ev_a, ev_b, a.tokens_per_s_per_request,
                      b.tokens_per_s_per_request, bands)
    primary = per_req if planner.mode == "rate" else per_gpu
    shared = (a.params_source, a.validation) == (b.params_source, b.validation)
    return Comparison(
        per_gpu=round(per_gpu.ratio, 4),
        per_gpu_interval=(round(per_gpu.lo, 4), round(per_gpu.hi, 4)),
        per_request=round(per_req.ratio, 4),
        per_request_interval=(round(per_req.lo, 4), round(per_req.hi, 4)),
        resolved=primary.resolved,
        basis=bands.describe() if shared else "scored by different fits or error bands: "
        "the two candidates' cross-validated intervals, independent")


def _current(planner: Planner) -> Row | None:
    """The runbook as written, through the same evaluation (for comparison)."""
    rb = planner.pair.runbook
    dep = rb.deployment
    d = DeploymentChoice(planner.pair.gpu, dep.parallel.tensor, dep.kv_cache_dtype,
                         dep.memory_fraction)
    own = shape_depth(planner.pair)
    written = rb.speculation.schedule is not None  # as written: its schedule
    s = next((x for x in shapes(planner.pair) if x.depth == own and not x.changes
              and x.scheduled == written), None) or next(
        (x for x in shapes(planner.pair) if x.depth == own and not x.scheduled), None)
    if s is None:
        return None
    saved = planner.stats
    planner.stats = Stats()
    try:
        return planner.evaluate(d, s)
    finally:
        planner.stats = saved


def _assumptions(p: Planner) -> list[str]:
    """What every row of the plan assumes, in words."""
    out = [
        f"acceptance by depth: {p.curve.source}",
        f"the SLO carried to each depth: {p.slo_curve.source}",
        f"expected context {p.context:,} tokens per sequence ({p.context_source}); mean "
        f"prompt {p.prompt:,} tokens, mean output {p.output:g} tokens (the workloads)",
        "a KV dtype does not change acceptance (FP8 KV can lower it slightly: measure "
        "before relying on it)",
        "TTFT is one prefill of the mean prompt (roofline, the fitted η) plus one step; "
        "queueing is not modelled and no published TTFT calibrates it",
        "memory bandwidth, the step model's roof: " + "; ".join(
            (p.pair.gpu_spec if g == p.pair.gpu else hardware.resolve(g)).bandwidth_summary
            for g in p.gpus),
        "memory fractions searched: " + ", ".join(sorted(
            {"engine default" if d.memory_fraction is None else f"{d.memory_fraction:g}"
             for d in deployment_choices(p.pair, p.opts)})),
    ]
    spec = p.pair.runbook.speculation
    if spec.num_steps is not None and spec.topk > 1:
        out.append(f"tree drafts: depth searched with top-{spec.topk} and "
                   f"{spec.num_draft_tokens} verified tokens kept (no source relates "
                   "acceptance to a tree's width); the tree is a chain of its depth")
    if spec.method.is_block_drafter:
        out.append("a block drafter runs the block it was trained with (SP303): only that "
                   "block is a candidate")
    if p.mode == "rate":
        out.append("a rate is served by identical replicas (data parallel), each at the "
                   "lowest concurrency that keeps up")
    return out
