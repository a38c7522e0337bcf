"""Speculation schedules (issue 32): derived from the step model and acceptance by depth,
pinned by hand with located errors, rendered in each engine's own form."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from specpair.analyse import schedule
from specpair.analyse.acceptance import by_depth, from_tau
from specpair.analyse.budget import compute
from specpair.analyse.latency import expected_speedup, parameters, setup
from specpair.analyse.launch import build_for
from specpair.analyse.plan.candidates import BASELINE, MAX_DEPTH, shapes
from specpair.analyse.plan.evaluators import ScheduledEvaluator
from specpair.analyse.plan.options import Options
from specpair.analyse.plan.planner import Planner
from specpair.analyse.plan.variants import variant
from specpair.analyse.schedule import MERGE_LOSS
from specpair.analyse.stepmodel import shape_for, step_times
from specpair.commands.site import ranges_text, text
from specpair.engines.schedule_model import ResolvedSchedule, ScheduledRange
from specpair.facts import k0_cost
from specpair.generate.plan_files import schedule_markdown
from specpair.load.runbooks import load_runbook
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair
from tests.support.examples import example
from tests.support.paths import write

VLLM_MINIMAL = """\
pair: {name: demo, title: Demo, owner: me}
engine: {name: vllm, version: 0.33.0}
target: {repo: org/llama-70b, revision: 0123456789abcdef0123456789abcdef01234567}
draft: {repo: org/eagle3, revision: 0123456789abcdef0123456789abcdef01234567}
speculation:
  method: EAGLE3
  num_speculative_tokens: 3
  schedule:
    - {start: 1, end: 8, k: 3}
    - {start: 9, end: 32, k: 1}
deployment: {gpu: H100-80GB, context_length: 8192}
acceptance: {slo: {min_length: 2.0}}
"""


def loaded_at_scale(mrr: int = 512) -> ResolvedPair:
    """The 70B EAGLE-3 example, allowed `mrr` running requests: its break-even crosses
    the expected acceptance inside what it holds. At its stated workloads (256 and
    512–2,048 prompt tokens) drafting stops paying near 300 running requests; at the
    12-token prompts assumed before workloads stated their lengths, near 200."""
    return variant(example("llama33-70b-eagle3-vllm"),
                   {("deployment", "max_running_requests"): mrr})


def low_acceptance() -> ResolvedPair:
    """`loaded_at_scale()` at a low acceptance (τ 1.4 at depth 3): even K = 1 loses more
    than K = 0's published cost at high load, so the schedule turns drafting off there."""
    return variant(loaded_at_scale(), {("acceptance", "slo", "min_length"): 1.4})


def test_derived_ranges_cover_every_batch_and_shorten_drafts_at_high_load() -> None:
    for pair in (loaded_at_scale(), low_acceptance()):
        s = schedule.derive(pair)
        # contiguous, from batch 1 to the engine's max running requests
        assert s.ranges[0].start == 1 and s.ranges[-1].end == 512
        assert all(a.end + 1 == b.start for a, b in zip(s.ranges, s.ranges[1:], strict=False))
        ks = [r.k for r in s.ranges]
        assert ks == sorted(ks, reverse=True)  # shorter drafts as the load grows
        assert len(set(ks)) == len(ks)  # neighbouring ranges of one K are one range
        # at high load the target alone, no draft loaded, is faster than any K
        assert s.ranges[-1].target_alone_faster_from is not None
    assert schedule.derive(loaded_at_scale()).ranges[0].k == 3
    # K = 1 of the EAGLE-3 head keeps more than K = 0 does (its published cost): on
    assert schedule.derive(loaded_at_scale()).ranges[-1].k == 1
    assert schedule.derive(low_acceptance()).ranges[-1].k == 0  # here drafting stops


K0_HIGH = 0.2158
"""The largest published K = 0 cost on vLLM: +21.58 % TPOT at 189 running requests
(vllm-project/vllm#49548, 2026-08-24; seongyun1104/depthchart RESULTS.md at a346d23)."""


@pytest.mark.parametrize("acceptance", ["slo 2.2", "slo 1.4"])
def test_k0_exactly_where_no_static_depth_beats_k0_at_its_published_cost(acceptance: str
                                                                          ) -> None:
    # checked through the latency model's own speedup of each static runbook variant
    # (`expected_speedup`, what the verdict and the site state), not the schedule's code;
    # K = 0 keeps the draft loaded: it costs the published upper end, not nothing
    pair = loaded_at_scale() if acceptance == "slo 2.2" else low_acceptance()
    s = schedule.derive(pair)
    k0 = 1 / (1 + K0_HIGH)
    curve = schedule.goodput(pair, compute(pair)).curve
    statics = {k: variant(pair, {("speculation", "num_speculative_tokens"): k})
               for k in (1, 2, 3)}
    for batch in (1, 16, 48, 64, 96, 128, 200, 256, 320, 400, 512):
        speed = {k: expected_speedup(p, compute(p), batch, curve.tau(k)).value
                 for k, p in statics.items()}
        pays = [k for k, v in speed.items() if v > k0]
        k = s.k_at(batch)
        assert (k == 0) == (not pays), (batch, k, speed)
        if pays:  # the scheduled K is one that pays, within 5% of the best static one
            assert k in pays and speed[k] >= 0.95 * max(speed.values()), (batch, k, speed)
        (r,) = [r for r in s.ranges if r.start <= batch <= r.end]
        if k == 0 or speed[k] < 0.99:  # the target alone, no draft loaded, is faster
            assert r.target_alone_faster_from is not None, (batch, r)
            assert r.target_alone_faster_from <= batch, (batch, r)
        if k and speed[k] > 1.01:  # drafting pays here: no note
            assert r.target_alone_faster_from is None or \
                r.target_alone_faster_from > batch, (batch, r)


def test_the_k0_cost_moves_where_a_schedule_stops_drafting(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    pair = low_acceptance()
    priced = schedule.derive(pair)
    monkeypatch.setattr(k0_cost, "cost", lambda engine: None)  # as if none were published
    free = schedule.derive(pair)
    assert free.k0_cost == "K = 0 cost: unmodelled (no published measurement for vllm)"
    first_off = {name: next(r.start for r in s.ranges if r.k == 0)
                 for name, s in (("free", free), ("priced", priced))}
    # priced, K = 0 pays later: between the two, a short draft still loses to the target
    # alone but less than K = 0 does, and the range says the target alone is faster
    assert first_off["priced"] > first_off["free"], first_off
    between = [r for r in priced.ranges
               if r.end >= first_off["free"] and r.start < first_off["priced"]]
    assert between and all(r.k > 0 and 0 in r.candidates for r in between), between
    for batch in range(first_off["free"], first_off["priced"]):
        (r,) = [r for r in between if r.start <= batch <= r.end]
        assert r.target_alone_faster_from is not None
        assert r.target_alone_faster_from <= max(batch, r.start), (batch, r)
    assert priced.k0_cost is not None and priced.k0_cost.startswith(
        "K = 0 cost: +4.7%–21.6% TPOT against the target alone")


def test_a_vllm_k0_range_shows_its_cost_and_an_sglang_one_says_unmodelled() -> None:
    pair = low_acceptance()
    budget = compute(pair)
    page = schedule_markdown(schedule.report(pair, budget, [1, 64, 512]))
    assert "K = 0 cost: +4.7%–21.6% TPOT against the target alone" in page
    assert "K = 0 still pays for the speculator: the target alone is faster here" in page
    c = schedule.compare(pair, budget, [512])
    assert c.schedule.k_at(512) == 0
    assert c.scheduled == [round(1 / (1 + K0_HIGH), 4)]  # not the target alone's 1.0
    line = ranges_text(c.schedule)  # the site's one line of the schedule (escaped)
    assert c.schedule.k0_cost is not None
    assert line.endswith(f": K 0 ({text(c.schedule.k0_cost)})"), line
    sglang = sglang_chain([{"start": 1, "end": 8, "k": 3}, {"start": 9, "end": 256, "k": 0}])
    pinned = schedule.pinned(sglang)
    assert pinned is not None and pinned.k0_cost == \
        "K = 0 cost: unmodelled (no published measurement for sglang)"
    derived = schedule.derive(sglang_chain())
    assert derived.k0_cost == pinned.k0_cost
    assert pinned.k0_cost in schedule_markdown(schedule.report(sglang, compute(sglang), [1]))


def test_the_deployment_bounds_the_ranges() -> None:
    assert schedule.derive(loaded_at_scale(48)).ranges[-1].end == 48


def test_the_speedup_memo_follows_every_input() -> None:
    # goodputs are shared between equal inputs (the planner's candidates) and memoise
    # each (K, batch): a changed step model, acceptance or deployment is a new goodput
    pair = loaded_at_scale()
    budget = compute(pair)
    base = schedule.goodput(pair, budget)
    first = base.speedup(2, 16)
    assert schedule.goodput(pair, budget) is base and base.speedup(2, 16) == first
    params = parameters(pair, budget).values
    slower = params.model_copy(update={"draft_s": params.draft_s * 3})
    curve = by_depth(pair)[0]
    better = from_tau(3.5, 3, "test", "EAGLE3")
    wider = variant(pair, {("deployment", "parallel", "tensor"): 8})
    for g, s, tau in [(schedule.goodput(pair, budget, params=slower),
                       setup(pair, budget, slower), curve.tau(2)),
                      (schedule.goodput(pair, budget, curve=better), setup(pair, budget),
                       better.tau(2)),
                      (schedule.goodput(wider, compute(wider)),
                       setup(wider, compute(wider)), curve.tau(2))]:
        assert tau is not None
        fresh = step_times(s.target, s.draft, shape_for("EAGLE3", 2, None, None, 1, None),
                           16, s.context, s.hw, s.params).speedup(tau)
        assert g is not base and g.speedup(2, 16) == fresh != first


def _problems(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    path = write(tmp_path / "runbooks" / "demo" / "runbook.yaml", text)
    with pytest.raises(SpecpairError) as info:
        load_runbook(path)
    return [(f"{p.location.line}:{p.location.field}", p.message) for p in info.value.problems]


def test_a_pinned_schedule_loads(tmp_path: Path) -> None:
    loaded = load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
                                VLLM_MINIMAL))
    ranges = loaded.runbook.speculation.schedule
    assert isinstance(ranges, list) and [(r.start, r.end, r.k) for r in ranges] == \
        [(1, 8, 3), (9, 32, 1)]


@pytest.mark.parametrize(("old", "new", "where", "message"), [
    ("{start: 9, end: 32, k: 1}", "{start: 10, end: 32, k: 1}",
     "10:speculation.schedule[1].start", "must start at 9"),
    ("{start: 9, end: 32, k: 1}", "{start: 9, end: 32, k: 4}",
     "10:speculation.schedule[1].k", "k 4 exceeds num_speculative_tokens 3"),
    ("{start: 1, end: 8, k: 3}", "{start: 1, end: 0, k: 3}",
     "9:speculation.schedule[0].end", ""),
    ("{start: 1, end: 8, k: 3}", "{start: 1, end: 8, k: -1}",
     "9:speculation.schedule[0].k", ""),
    ("{start: 1, end: 8, k: 3}", "{start: 2, end: 8, k: 3}",
     "9:speculation.schedule[0].start", "must start at 1"),
    ("  schedule:\n", "  schedule: sometimes\n  unused:\n", "8:speculation.schedule", ""),
])
def test_bad_schedules_are_located(tmp_path: Path, old: str, new: str, where: str,
                                   message: str) -> None:
    text = VLLM_MINIMAL.replace(old, new)
    assert text != VLLM_MINIMAL
    found = _problems(tmp_path, text)
    assert any(w == where and message in m for w, m in found), found


def test_a_schedule_needs_a_chain(tmp_path: Path) -> None:
    text = VLLM_MINIMAL.replace("num_speculative_tokens: 3", "num_steps: 3\n  topk: 2\n"
                                "  num_draft_tokens: 6")
    found = _problems(tmp_path, text)
    assert any(w.endswith("speculation.schedule") and "chain" in m for w, m in found), found


# ------------------------------------------------------------------ launch


def _spec_config(argv: list[object]) -> dict[str, object]:
    i = argv.index("--speculative-config")
    return json.loads(str(argv[i + 1]))  # type: ignore[no-any-return]


def test_vllm_renders_the_inclusive_ranges_and_keeps_k_max() -> None:
    pair = variant(loaded_at_scale(), {("speculation", "schedule"): "derived"})
    launch = build_for(pair)
    assert not launch.errors, launch.errors
    config = _spec_config(launch.argv)
    entries = config["num_speculative_tokens_per_batch_size"]
    assert entries == [[r.start, r.end, r.k] for r in schedule.derive(pair).ranges]
    assert config["num_speculative_tokens"] == 3  # the largest K: what the engine sizes


def test_vllm_refuses_a_schedule_with_data_parallelism() -> None:
    pair = variant(loaded_at_scale(), {("speculation", "schedule"): "derived",
                                       ("deployment", "parallel", "data"): 2})
    errors = [p for p in build_for(pair).errors if p.field == "speculation.schedule"]
    assert errors and "data parallelism" in errors[0].message
    assert "_maybe_disable_dynamic_sd_for_data_parallel" in errors[0].message


def sglang_chain(schedule_value: object = "derived") -> ResolvedPair:
    return variant(example("deepseek-v3-mtp"), {("speculation", "schedule"): schedule_value,
                                                ("deployment", "max_running_requests"): 256})


def test_sglang_gets_one_tier_per_range_and_steps_at_the_largest_candidate() -> None:
    pair = sglang_chain([{"start": 1, "end": 8, "k": 3}, {"start": 9, "end": 64, "k": 1},
                         {"start": 65, "end": 256, "k": 0}])
    launch = build_for(pair)
    assert not launch.errors, launch.errors
    argv = [str(a) for a in launch.argv]
    path = argv[argv.index("--speculative-adaptive-config") + 1]
    tiers = json.loads(launch.files[path])
    assert {k: v["candidate_steps"] for k, v in tiers.items() if k.isdigit()} == \
        {"1": [3], "9": [1], "65": [0]}
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"


@pytest.mark.parametrize("name", ["ling-3-flash-dspark", "llama31-8b-eagle3", "qwen3-8b-dflash",
                                  "gpt-oss-120b-ngram-sglang-0-5-18"])
def test_releases_that_cannot_run_a_schedule_say_why(name: str) -> None:
    pair = example(name)
    check = pair.release.schedule_refusal
    assert check is not None
    why = check(pair)
    assert why is not None and re.search(r"adaptive_spec_params\.py", why), why


def test_sglang_0_5_18_says_and_launches_the_same_schedule() -> None:
    """The break-even page, the planner and the launch ask one release for its answer: an
    EAGLE chain on 0.5.18 (whose adaptive code is 0.5.23's for what specpair renders) gets
    its tiers, where the page once said "not reviewed" while the launch wrote them."""
    pair = variant(sglang_chain(), {("engine", "version"): "0.5.18"})
    assert pair.engine == "sglang 0.5.18"
    assert pair.release.schedule_refusal_for(pair) is None
    launch = build_for(pair)
    assert not launch.errors, launch.errors
    assert "--speculative-adaptive" in [str(a) for a in launch.argv]
    ngram = example("gpt-oss-120b-ngram-sglang-0-5-18")
    assert "only EAGLE/EAGLE3" in (ngram.release.schedule_refusal_for(ngram) or "")


# ------------------------------------------------------------------ the planner


def test_the_plan_searches_a_schedule_that_wins_over_every_static_depth() -> None:
    # The 70B pair on its own GPU and TP, free to run up to the 256 sequences vLLM's
    # default allows. Published Llama-3.3-70B EAGLE-3 sweeps on H100 lose the speedup
    # above ~32 sequences (the runbook's note): memory-bound decode makes drafts cheap at
    # low load, compute-bound verify of K + 1 tokens per sequence makes them dear at high
    # load, so no static K serves both ends, and a schedule should.
    pair = variant(example("llama33-70b-eagle3-vllm"),
                   {("deployment", "max_running_requests"): None})
    planner = Planner(pair, Options(gpus=("H100-80GB",), max_gpus=4))
    (d,) = {d for d, _ in planner.candidates() if d.tensor == 4 and d.kv.value == "auto"
            and d.memory_fraction == 0.92}
    rows = {s.label: planner.evaluate(d, s) for s in [BASELINE, *shapes(pair)]}
    (label,) = [k for k in rows if k.startswith("schedule") and f"K ≤ {MAX_DEPTH}" in k]
    scheduled = rows.pop(label)
    written = [k for k in rows if k.startswith("schedule")]  # the runbook's own, K ≤ 3
    assert len(written) == 1
    rows.pop(written[0])
    assert scheduled is not None and scheduled.passes_check, scheduled
    levels = (1, 4, 16, 32, 64, 96, 128, 192, 256)
    assert scheduled.capacity >= levels[-1]

    def speed(key: str) -> list[float]:
        return [planner.evaluators[key].at(c).per_request for c in levels]

    ours = speed(scheduled.key)
    for other in rows.values():
        assert other is not None
        theirs = speed(other.key)
        # never slower than a static depth by more than the merge allowance, at any load;
        # than the target alone (no draft loaded) by at most K = 0's published cost: at
        # high load the schedule keeps paying for the speculator it loaded
        floor = 1 - MERGE_LOSS if other.depth > 0 else (1 - 1e-9) / (1 + K0_HIGH)
        assert all(a >= b * floor for a, b in zip(ours, theirs, strict=True)), \
            (other.shape, ours, theirs)
        # and faster at some load, by more than the allowance: each static K loses
        # somewhere, the target alone at low load
        assert any(a > b * (1 + MERGE_LOSS) for a, b in zip(ours, theirs, strict=True)), \
            (other.shape, ours, theirs)
    # at K = 0 the planner's step is the target's decode slowed by the published cost
    ev = planner.evaluators[scheduled.key]
    assert isinstance(ev, ScheduledEvaluator) and ev.k0_slowdown == pytest.approx(1 + K0_HIGH)
    off = replace(ev, schedule=ResolvedSchedule(source="test", ranges=[
        ScheduledRange(start=1, end=256, k=0, candidates=[0])]))
    baseline = rows[BASELINE.label]
    assert baseline is not None
    assert off.at(64).tpot_s == pytest.approx(
        planner.evaluators[baseline.key].at(64).tpot_s * (1 + K0_HIGH))
    # the written runbook carries the schedule
    assert "speculation.schedule" not in scheduled.changes  # the runbook asks for it already
    assert all(r is not None and r.changes.get("speculation.schedule") == "static"
               for r in rows.values() if r is not None and r.depth > 0)


def test_bench_measures_where_the_schedule_switches() -> None:
    from specpair.commands.cli.bench import _bench_levels

    pair = variant(loaded_at_scale(), {("speculation", "schedule"): [
        {"start": 1, "end": 8, "k": 3}, {"start": 9, "end": 64, "k": 1},
        {"start": 65, "end": 256, "k": 0}]})
    # every range's ends, the last one's too (the deployment holds 256)
    assert _bench_levels(pair) == [1, 8, 9, 64, 65, 256]
    static = variant(pair, {("speculation", "schedule"): "static"})
    assert _bench_levels(static) == [1, 4, 16]


def test_bench_levels_stop_at_what_the_deployment_holds() -> None:
    from specpair.analyse.schedule import bench_levels
    from specpair.engines.schedule_model import ResolvedSchedule, ScheduledRange

    schedule = ResolvedSchedule(source="pinned", ranges=[
        ScheduledRange(start=1, end=8, k=3, candidates=[3]),
        ScheduledRange(start=9, end=64, k=1, candidates=[1]),
        ScheduledRange(start=65, end=256, k=0, candidates=[0])])
    assert bench_levels(schedule, 256) == [1, 8, 9, 64, 65, 256]
    # 32 running requests at most: the 9-64 range ends there, the next never starts
    assert bench_levels(schedule, 32) == [1, 8, 9, 32]
    assert bench_levels(schedule, 1) == [1]


def test_the_static_variant_is_the_schedules_largest_k_without_it() -> None:
    from specpair.analyse.schedule import static_variant

    pair = variant(loaded_at_scale(), {("speculation", "schedule"): [
        {"start": 1, "end": 8, "k": 2}, {"start": 9, "end": 256, "k": 1}]})
    fixed = static_variant(pair)
    assert fixed is not None and fixed.schedule is None
    assert fixed.runbook.speculation.schedule is None
    assert fixed.runbook.speculation.num_speculative_tokens == 2
    assert static_variant(variant(pair, {("speculation", "schedule"): "static"})) is None


def test_a_schedule_the_budget_cannot_derive_is_a_located_launch_error() -> None:
    # TP 3 does not split the 70B's heads: the budget (which the derivation reads) is
    # refused, and the launch says so at the schedule instead of raising
    pair = variant(example("llama33-70b-eagle3-vllm"),
                   {("deployment", "parallel", "tensor"): 3})
    errors = [p for p in build_for(pair).errors if p.field == "speculation.schedule"]
    assert errors and "cannot be derived" in errors[0].message
    assert "do not split over 3 ranks" in errors[0].message
