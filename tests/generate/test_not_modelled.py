"""A deployment the step model refuses by name (a model replica over two nodes:
`stepmodel.deployment_refusal`) still builds: every generator writes its files, and where
a modelled latency number would stand they say "not modelled: <the refusal>" instead."""

from __future__ import annotations

import json
import pkgutil
import re
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import yaml

import specpair.generate as generators
from specpair.analyse.analysis import Analysis
from specpair.analyse.checks.gate import Context, run
from specpair.analyse.step_inputs import not_modelled_text, unmodelled
from specpair.generate import budget_files, dashboard_files, monitoring_files, plan_files
from tests.support.geometries import dense
from tests.support.multinode import PAIRS, sglang_two_nodes, vllm_two_nodes
from tests.support.pairs import make_pair
from tests.support.promtool import check_rules, rule_groups

TWO_NODES = [vllm_two_nodes, sglang_two_nodes]
REFUSAL = "not modelled: cross-node model parallelism"


def generator_modules() -> list[Any]:
    modules = [import_module(f"specpair.generate.{m.name}")
               for m in pkgutil.iter_modules(generators.__path__)]
    return [m for m in modules if hasattr(m, "generate")]


@pytest.mark.parametrize("make", TWO_NODES)
def test_every_generator_writes_its_files(make: Any) -> None:
    a = Analysis(make())
    assert a.refusal is not None and a.not_modelled == not_modelled_text(a.refusal)
    assert a.modelled is None and a.not_modelled.startswith(REFUSAL)
    modules = generator_modules()
    assert len(modules) >= 8
    for module in modules:
        files = module.generate(a)
        assert files and all(files.values()), module.__name__


@pytest.mark.parametrize("make", TWO_NODES)
def test_the_refusal_stands_where_the_numbers_would(make: Any) -> None:
    a = Analysis(make())
    text = a.not_modelled
    assert text is not None
    budget = budget_files.generate(a)
    md = budget["budget.md"].decode()
    assert "## What this budget serves" in md and REFUSAL in md
    assert "TPOT at the SLO" not in md and "break-even τ* |" not in md
    assert json.loads(budget["budget.json"])  # the memory budget is written as usual
    assert "token capacity" in md

    plan = plan_files.generate(a)
    breakeven = plan["breakeven.md"].decode()
    assert REFUSAL in breakeven
    assert not re.search(r"τ\* (at|\d)|TPOT \(ms\)|\d+\.\d+×", breakeven)
    assert json.loads(plan["breakeven.json"]) == {"not_modelled": text}
    assert plan["staging.md"] and plan["stage-and-launch.sh"]

    board = json.loads(dashboard_files.generate(a)[dashboard_files.DASHBOARD])
    panels = [p for p in board["panels"] if p["type"] != "row"]
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    assert not [e for e in exprs if "break_even" in e or "modelled_speedup" in e]
    notes = [p for p in panels if p["type"] == "text"]
    assert len(notes) == 1 and text in notes[0]["options"]["content"]
    assert any("acceptance_length" in e for e in exprs)  # measured panels stay


@pytest.mark.parametrize("make", TWO_NODES)
def test_the_gate_names_the_refusal_and_does_not_call_the_budget_refused(make: Any) -> None:
    pair = make()
    refusal = unmodelled(pair)
    assert refusal is not None
    for findings in (Analysis(pair).findings, run(Context(pair))):
        by_rule = {f.rule: f for f in findings}
        assert "SP703" in by_rule and by_rule["SP703"].severity == "warning"
        assert not_modelled_text(refusal) in by_rule["SP703"].message
        assert "SP501" not in by_rule  # the budget itself is computed


def test_a_pair_within_one_node_is_modelled() -> None:
    a = Analysis(PAIRS["qwen3-8b-dflash"])
    assert a.refusal is None and a.not_modelled is None and a.modelled is a.latency
    assert "SP703" not in {f.rule for f in a.findings}


@pytest.mark.parametrize("make", TWO_NODES)
def test_promtool_accepts_the_rules_without_break_even(make: Any, tmp_path: Path) -> None:
    files = monitoring_files.generate(Analysis(make()))
    rules = tmp_path / monitoring_files.RULES
    rules.write_bytes(files[monitoring_files.RULES])
    manifest = tmp_path / "manifest-groups.yaml"
    manifest.write_text(yaml.safe_dump(
        {"groups": rule_groups(files[monitoring_files.MANIFEST].decode())}))
    for path in (rules, manifest):
        assert "SUCCESS" in check_rules(path)


@pytest.mark.parametrize("make", TWO_NODES)
def test_the_site_page_states_the_refusal_instead_of_numbers(make: Any) -> None:
    from specpair.commands.site import index_page, pair_page, text

    a = Analysis(make())
    assert a.not_modelled is not None
    page, charts, summary = pair_page(a, None)
    # the overview, the break-even section, the alerts and the plan each say why
    assert page.count(text(a.not_modelled)) >= 4
    assert "speedup.svg" not in charts and "break-even.svg" not in charts
    assert "plan-front.svg" not in charts  # the planner scores with the step model
    assert "SpecpairBelowBreakEven" not in page  # its rule is not generated either
    assert "SpecpairAcceptanceBelowSLO" in page  # measured against the runbook: stays
    assert "token capacity" in page  # the memory budget is on the page as usual
    assert summary["break_even"] is None
    assert "not modelled" in index_page([summary])


def test_the_rule_file_documents_no_break_even_delay_or_rule() -> None:
    text = monitoring_files.generate(Analysis(vllm_two_nodes()))[monitoring_files.RULES].decode()
    header = text.split("groups:")[0]
    assert "Detection delay, SpecpairBelowBreakEven" not in header
    assert "break-even and fallback" not in header  # its first line names what it holds
    assert "Detection delay, SpecpairAcceptanceBelowSLO" in header


def test_a_derived_schedule_of_a_deployment_the_model_refuses_is_a_runbook_error() -> None:
    """A derived schedule comes from the step model: `validate` names the refusal and the
    way out (pin the ranges, or a static K) before any generator runs."""
    from specpair.load.rules import check_runbook

    pair = make_pair(dense(36), dense(5), engine="vllm", version="0.33.0",
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 3,
                                  "schedule": "derived"},
                     deployment={"gpus_per_node": 4, "nodes": 2, "parallel": {"tensor": 8}})
    (finding,) = [f for f in check_runbook(pair.runbook) if f.field == "speculation.schedule"]
    assert finding.severity == "error" and "cross-node model parallelism" in finding.message
    assert "pin the ranges" in finding.hint
    static = pair.runbook.model_copy(update={"speculation": pair.runbook.speculation.model_copy(
        update={"schedule": None})})
    assert not [f for f in check_runbook(static) if f.field == "speculation.schedule"]


@pytest.mark.parametrize("make", TWO_NODES)
def test_the_planner_ranks_the_deployments_within_a_node(make: Any) -> None:
    """The runbook as written spans two nodes: the plan says so and ranks the
    candidates the latency model represents instead of refusing the whole plan."""
    from specpair.analyse.plan.search import plan
    from specpair.generate.plan_report import markdown

    p = plan(make())
    assert p.current is None and p.current_not_modelled is not None
    assert p.current_not_modelled.startswith(REFUSAL)
    assert p.rows and all(r.gpus <= 4 for r in p.rows)
    assert "Its deployment is not modelled: cross-node" in markdown(p)


def test_planner_candidates_wider_than_a_node_are_counted_not_modelled() -> None:
    """--max-gpus over two nodes with pipeline 2: TP 8 × PP 2 spans both nodes; it is
    counted as not modelled, the other candidates are ranked."""
    from specpair.analyse.plan.options import Options
    from specpair.analyse.plan.search import plan
    from specpair.generate.plan_report import summary

    pair = make_pair(dense(36), dense(5), engine="vllm", version="0.33.0",
                     speculation={"method": "DFLASH", "block_size": 16},
                     deployment={"gpus_per_node": 8, "nodes": 2,
                                 "parallel": {"tensor": 4, "pipeline": 2}})
    p = plan(pair, Options(max_gpus=16))
    assert p.counts.not_modelled > 0 and p.rows
    assert all(r.tensor * 2 <= 8 for r in p.rows)
    assert f"{p.counts.not_modelled} not modelled by the latency model" in summary(p)


def _moe(layers: int) -> Any:
    from specpair.model.geometry import MixtureOfExperts

    return dense(layers).model_copy(update={"moe": MixtureOfExperts(
        experts=64, active_experts=8, expert_params=3 * 4096 * 1024, moe_layers=layers)})


def test_vllm_expert_parallelism_spans_tensor_times_data() -> None:
    """vLLM has no EP size: --enable-expert-parallel shards the experts over every
    tensor × data rank (vllm/model_executor/layers/fused_moe/config.py,
    FusedMoEParallelConfig.make: ep_size = flattened tp_size = tp · dp). An expert size
    that is not that product is refused; SGLang's divisor rule stays."""
    from specpair.load.rules import check_runbook

    def expert_findings(engine: str, version: str, parallel: dict[str, int]) -> list[str]:
        pair = make_pair(_moe(8), dense(1), engine=engine, version=version,
                         speculation={"method": "EAGLE3", "num_speculative_tokens": 3},
                         deployment={"gpus_per_node": 8, "parallel": parallel})
        return [f.message for f in check_runbook(pair.runbook)
                if f.field == "deployment.parallel.expert"]

    (message,) = expert_findings("vllm", "0.33.0", {"tensor": 8, "expert": 2})
    assert "every tensor × data rank" in message and "8 × 1 = 8" in message
    assert not expert_findings("vllm", "0.33.0", {"tensor": 8, "expert": 8})
    assert not expert_findings("vllm", "0.33.0", {"tensor": 2, "data": 4, "expert": 8})
    assert not expert_findings("sglang", "0.5.23", {"tensor": 8, "expert": 2})


def test_vllm_data_parallelism_of_an_moe_is_refused_by_the_budget() -> None:
    """vLLM puts the MoE layers of its data-parallel ranks in one group of tensor × data
    ranks even without expert parallelism (flatten_tp_across_dp_and_pcp): specpair's
    per-replica budget would overstate each rank's expert weights, so it refuses."""
    from specpair.analyse.budget import compute
    from specpair.model.errors import SpecpairError

    def pair(target: Any, data: int) -> Any:
        return make_pair(target, dense(1), engine="vllm", version="0.33.0",
                         speculation={"method": "EAGLE3", "num_speculative_tokens": 3},
                         deployment={"gpu": "H200-141GB", "gpus_per_node": 8,
                                     "parallel": {"tensor": 2, "data": data}})

    with pytest.raises(SpecpairError, match="not modelled: data parallelism of an MoE target"):
        compute(pair(_moe(8), 2))
    assert compute(pair(_moe(8), 1)).baseline.fits is not None  # one replica: budgeted
    assert compute(pair(dense(8), 2)).baseline is not None  # dense replicas: budgeted


def test_a_pinned_schedule_of_a_refused_deployment_is_still_shown() -> None:
    """The launch runs a pinned schedule whatever the step model says: breakeven.md, its
    JSON and the site page list its ranges, with no speedup."""
    from specpair.commands.site import pair_page
    from specpair.generate.launch_files import generate as launch_files

    ranges = [{"start": 1, "end": 8, "k": 3}, {"start": 9, "end": 64, "k": 1}]
    a = Analysis(make_pair(dense(36), dense(1), engine="vllm", version="0.33.0",
                           speculation={"method": "EAGLE3", "num_speculative_tokens": 3,
                                        "schedule": ranges},
                           deployment={"gpus_per_node": 4, "nodes": 2,
                                       "parallel": {"tensor": 8}}))
    assert a.not_modelled is not None
    launched = b"".join(launch_files(a).values()).decode()
    assert "num_speculative_tokens_per_batch_size" in launched  # what the engine runs
    files = plan_files.generate(a)
    md = files["breakeven.md"].decode()
    assert "| 1–8 | 3 |" in md and "| 9–64 | 1 |" in md and "speedups are not modelled" in md
    assert [(r["start"], r["end"], r["k"]) for r in json.loads(files["breakeven.json"])[
        "schedule"]["ranges"]] == [(1, 8, 3), (9, 64, 1)]
    page = pair_page(a, None)[0]
    assert "1–8: K 3, 9–64: K 1" in page
