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

import specpair.generators as generators
from specpair.analysis import Analysis
from specpair.checks import Context, run
from specpair.generators import budget_files, dashboard_files, monitoring_files, plan_files
from specpair.step_inputs import not_modelled_text, unmodelled
from tests.promtool import check_rules, rule_groups
from tests.test_manifests import PAIRS, sglang_two_nodes, vllm_two_nodes

TWO_NODES = [vllm_two_nodes, sglang_two_nodes]
REFUSAL = "not modelled: cross-node model parallelism"


def generator_modules() -> list[Any]:
    modules = [import_module(f"specpair.generators.{m.name}")
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
    from specpair.site import index_page, pair_page, text

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
