"""Only points the deployment can hold; 'stops paying' and hints that point the right way."""

from __future__ import annotations

import json

import pytest

from specpair.analyse.budget import compute
from specpair.analyse.latency import model
from tests.support.geometries import dense
from tests.support.pairs import make_pair, with_runbook
from tests.support.paths import REPO

EXAMPLES = sorted(p.parent.parent.name for p in REPO.glob("runbooks/*/generated/breakeven.json"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_show_no_point_beyond_what_the_deployment_holds(name: str) -> None:
    folder = REPO / "runbooks" / name / "generated"
    latency = json.loads((folder / "breakeven.json").read_text())
    budget = json.loads((folder / "budget.json").read_text())
    pool = budget["speculative"] or budget["baseline"]
    holds = min(pool["max_running_requests"],
                pool["max_total_tokens"] // latency["expected_context"])
    assert latency["capacity"] <= holds
    assert latency["concurrency"] <= latency["capacity"]
    assert max(p["concurrency"] for p in latency["curve"]) <= latency["capacity"]
    stops = latency["stops_paying_at_slo"]
    assert stops is None or latency["concurrency"] <= stops <= latency["capacity"]


def test_deepseek_headline_is_at_a_concurrency_its_budget_fits() -> None:
    folder = REPO / "runbooks" / "deepseek-v3-mtp" / "generated"
    latency = json.loads((folder / "breakeven.json").read_text())
    budget = json.loads((folder / "budget.json").read_text())
    tokens = budget["speculative"]["max_total_tokens"]
    assert latency["concurrency"] * latency["expected_context"] <= tokens
    assert "not within what this deployment can run" in (
        folder / "breakeven.md").read_text() or latency["stops_paying_at_slo"] is not None


def _eagle(engine: str = "sglang", version: str = "0.5.23",
           **deployment: object):  # type: ignore[no-untyped-def]
    return make_pair(dense(32), dense(1), engine=engine, version=version,
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 4},
                     deployment={"context_length": 8192, **deployment},
                     target_bytes=16 << 30, draft_bytes=400 << 20)


def test_a_small_kv_pool_caps_the_curve_and_the_headline() -> None:
    # a fixed 2 GiB KV budget holds far fewer long sequences than the 256 asked for
    pair = _eagle("vllm", "0.33.0", concurrency=256, max_running_requests=256,
                  mean_context=4096, kv_cache_memory_bytes=2 << 30)
    budget = compute(pair)
    m = model(pair, budget)
    pool = budget.speculative or budget.baseline
    assert m.capacity == pool.max_total_tokens // 4096 < 256
    assert m.concurrency == m.capacity and m.requested_concurrency == 256
    assert m.curve[-1].concurrency == m.capacity
    assert any("holds" in h and "256" in h for h in m.hints)
    assert m.expected_context == 4096


def test_an_unreachable_slo_says_lower_it_or_lengthen_the_block() -> None:
    pair = with_runbook(_eagle(concurrency=8), acceptance={"slo": {"min_length": 7.0}})
    m = model(pair, compute(pair))
    assert not m.slo_ok and "unreachable" in m.slo_verdict
    assert any("lower the SLO to at most 5" in h and "lengthen" in h for h in m.hints)
    assert not any("lower concurrency" in h for h in m.hints)


def test_lower_concurrency_is_suggested_only_where_it_raises_the_speedup() -> None:
    # a wide block at high concurrency: verify turns compute-bound, τ* rises with B
    wide = make_pair(dense(36), dense(5), speculation={"method": "DFLASH", "block_size": 16},
                     deployment={"context_length": 8192, "concurrency": 48},
                     target_bytes=16 << 30, draft_bytes=2 << 30)
    # an SLO below τ*'s whole interval at 48 (a fail, not "uncertain")
    first = model(wide, compute(wide))
    slo = round(first.at_concurrency.break_even_range[0] * 0.97, 2)
    wide = with_runbook(wide, acceptance={"slo": {"min_length": slo}})
    m = model(wide, compute(wide))
    assert m.slo_status == "fail"
    lower = [p for p in m.curve if p.concurrency < 48 and p.break_even * 1.1 <= slo
             and p.speedup_at_slo > m.at_concurrency.speedup_at_slo]
    assert lower, [(p.concurrency, p.break_even) for p in m.curve]
    hint = next((h for h in m.hints if h.startswith("lower concurrency")), None)
    assert hint is not None, m.hints
    to = int(hint.split()[3])
    there = next(p for p in m.curve if p.concurrency == to)
    assert there.speedup_at_slo > m.at_concurrency.speedup_at_slo
    assert there.break_even * 1.1 <= slo
    # an MoE-free pair whose speedup only falls with B: at its lowest concurrency there is
    # nothing lower to suggest
    low = with_runbook(wide, deployment={"concurrency": 1},
                       acceptance={"slo": {"min_length": 1.2}})
    m = model(low, compute(low))
    assert not any(h.startswith("lower concurrency") for h in m.hints)


def test_stops_paying_is_a_concurrency_or_not_within_the_deployment() -> None:
    pair = with_runbook(_eagle(concurrency=1), acceptance={"slo": {"min_length": 2.0}})
    m = model(pair, compute(pair))
    if m.stops_paying_at_slo is None:
        assert all(p.break_even < 2.0 for p in m.curve)
    else:
        assert m.stops_paying_at_slo <= m.capacity
        point = next(p for p in m.curve if p.concurrency == m.stops_paying_at_slo)
        assert point.break_even >= 2.0


def test_an_slo_inside_the_break_even_interval_is_uncertain_not_pass_or_fail() -> None:
    pair = _eagle(concurrency=8)
    m = model(pair, compute(pair))
    lo, hi = m.at_concurrency.break_even_range
    assert lo < hi
    inside = with_runbook(pair, acceptance={"slo": {"min_length": round((lo + hi) / 2, 2)}})
    got = model(inside, compute(inside))
    assert got.slo_status == "uncertain" and got.slo_verdict.startswith("uncertain: measure")
    assert any("measure" in h for h in got.hints)
    below = with_runbook(pair, acceptance={"slo": {"min_length": round(lo * 0.9, 2)}})
    assert model(below, compute(below)).slo_status == "fail"
    above = with_runbook(pair, acceptance={"slo": {"min_length": round(
        max(hi, m.at_concurrency.break_even * 1.1) * 1.05, 2)}})
    got = model(above, compute(above))
    assert got.slo_status in ("pass", "unreachable")


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_shows_intervals_in_breakeven_and_budget(name: str) -> None:
    folder = REPO / "runbooks" / name / "generated"
    latency = json.loads((folder / "breakeven.json").read_text())
    here = latency["at_concurrency"]
    lo, hi = here["break_even_range"]
    assert lo < hi
    text = (folder / "breakeven.md").read_text()
    assert f"{here['break_even']:.2f} [{lo:.2f}–{hi:.2f}]" in text
    assert "cross-validated" in text
    budget = (folder / "budget.md").read_text()
    assert "## What this budget serves" in budget and f"[{lo:.2f}–{hi:.2f}]" in budget
    # the verdict follows the interval: inside it, uncertain
    slo = latency["slo"]
    assert (latency["slo_status"] == "uncertain") == (lo <= slo <= hi) or \
        latency["slo_status"] == "unreachable"


def test_the_public_expected_speedup_is_the_verdicts() -> None:
    from specpair.analyse.latency import expected_speedup

    pair = _eagle(concurrency=8)
    budget = compute(pair)
    m = model(pair, budget)
    got = expected_speedup(pair, budget, 8)
    assert got.value == pytest.approx(m.at_concurrency.speedup_at_slo, rel=1e-3)
    assert (got.lo, got.hi) == pytest.approx(m.at_concurrency.speedup_at_slo_range, rel=1e-3)
    assert got.lo < got.value * 1.5 and got.basis


def test_the_gates_slo_check_states_what_the_model_does() -> None:
    # the planner's gate run reads only slo_check; it must agree with the model it stands
    # for in every status (pass, fail, uncertain, unreachable) and a capped concurrency
    from specpair.analyse.latency import slo_check

    base = _eagle(concurrency=8)
    m0 = model(base, compute(base))
    lo, hi = m0.at_concurrency.break_even_range
    pairs = [with_runbook(base, acceptance={"slo": {"min_length": v}})
             for v in (7.0, round((lo + hi) / 2, 2), round(lo * 0.9, 2),
                       round(max(hi, m0.at_concurrency.break_even * 1.1) * 1.05, 2))]
    pairs.append(_eagle("vllm", "0.33.0", concurrency=256, max_running_requests=256,
                        mean_context=4096, kv_cache_memory_bytes=2 << 30))
    statuses = set()
    for pair in pairs:
        budget = compute(pair)
        m, got = model(pair, budget), slo_check(pair, budget)
        statuses.add(m.slo_status)
        assert (got.concurrency, got.slo_ok, got.slo_verdict) == (
            m.concurrency, m.slo_ok, m.slo_verdict)
    assert statuses == {"pass", "fail", "uncertain", "unreachable"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_planners_gate_finds_what_the_whole_gate_does(name: str) -> None:
    # Planner._gate_context hands the gate slo_check instead of the latency model: the
    # findings of every speculative candidate equal those of run(Context(final))
    from specpair.analyse.checks.gate import Context, run
    from specpair.analyse.plan.options import Options
    from specpair.analyse.plan.planner import Planner
    from specpair.model.errors import SpecpairError
    from tests.support.examples import example

    pair = example(name)
    planner = Planner(pair, Options())
    seen = 0
    for d, s in list(planner.candidates())[:40]:
        if not s.speculative:
            continue
        changes = planner._changes(d, s)
        changes[("deployment", "max_running_requests")] = 8
        final = planner._variant(changes)
        try:
            budget = planner._budget(final)
        except SpecpairError:
            continue
        fast = [(f.rule, f.message) for f in run(planner._gate_context(final, budget))]
        ctx = Context(final)
        ctx.staging = planner._staging_plan(final)
        assert fast == [(f.rule, f.message) for f in run(ctx)]
        seen += 1
    assert seen


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_names_the_layers_the_step_model_does_not_time(name: str) -> None:
    """Issue 54: a latency output names what the step model cannot predict. gpt-oss's
    counts come from its own config.json (layer_types, sliding_window), not from
    specpair's geometry: it slides 18 of its 36 layers (window 128). Ling's Bailing
    hybrid must name its KDA linear-attention layers; the dense and MLA examples nothing."""
    text = (REPO / "runbooks" / name / "generated" / "breakeven.json").read_text()
    untimed = [a for a in json.loads(text)["assumptions"]
               if a.startswith("not timed as the engine runs them")]
    if name.startswith("gpt-oss-120b"):
        config = json.loads((REPO / "tests/fixtures/configs/openai__gpt-oss-120b/config.json"
                             ).read_text())
        sliding = config["layer_types"].count("sliding_attention")
        assert sliding == 18 and config["sliding_window"] == 128
        assert untimed == [f"not timed as the engine runs them, in the target: {sliding} "
                           f"sliding-window layers (window {config['sliding_window']}) read "
                           "their KV over the whole context and add no attention FLOPs. "
                           "The step times, τ* and speedups are unverified for these layers"]
    elif name.startswith("ling-3"):
        assert len(untimed) == 1 and "linear-attention layers (kda)" in untimed[0]
    else:  # full attention and MLA only: nothing left out
        assert untimed == []
