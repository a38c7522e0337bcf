"""The generated Grafana dashboards: byte-identical across processes, every query valid
PromQL for Prometheus's promtool, every recorded series it plots recorded by the pair's
rules, and the budget, SLO and τ* lines present."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from specpair.analyse.analysis import Analysis
from specpair.commands.build import load_pairs
from specpair.generate import dashboard_files, monitoring_files
from tests.support import proc
from tests.support.paths import REPO
from tests.support.promtool import check_rules, rule_groups

PAIRS = {p.name: p for p in load_pairs(REPO)}


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def exprs(board: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in panels(board) for t in p.get("targets", [])]


def test_dashboards_are_byte_identical_across_processes() -> None:
    script = ("import sys; from pathlib import Path; "
              "from specpair.commands.build import load_pairs; "
              "from specpair.analyse.analysis import Analysis; "
              "from specpair.generate import dashboard_files as d; "
              "[sys.stdout.buffer.write(d.generate(Analysis(p))[d.DASHBOARD]) "
              "for p in load_pairs(Path(sys.argv[1]))]")
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        runs.append(proc.run([sys.executable, "-c", script, str(REPO)], env=env,
                                   capture_output=True, check=True, cpu_s=300).stdout)
    assert runs[0] == runs[1] and runs[0]
    committed = b"".join((REPO / "runbooks" / name / "generated" / dashboard_files.DASHBOARD)
                         .read_bytes() for name in sorted(PAIRS))
    assert runs[0] == committed


def test_every_query_is_promql_that_promtool_accepts(tmp_path: Path) -> None:
    for name, pair in PAIRS.items():
        board = json.loads(dashboard_files.generate(Analysis(pair))[dashboard_files.DASHBOARD])
        queries = [e.replace("$instance", ".*").replace("$namespace", ".*")
                   for e in exprs(board)]
        assert queries
        rules = {"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)]}]}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(rules))
        check_rules(path)


def test_dashboards_plot_what_the_rules_record_and_the_budget() -> None:
    for name, pair in PAIRS.items():
        analysis = Analysis(pair)
        board = json.loads(dashboard_files.generate(analysis)[dashboard_files.DASHBOARD])
        groups = rule_groups(monitoring_files.generate(analysis)[monitoring_files.RULES].decode())
        recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
        used = {n for e in exprs(board) for n in re.findall(r"specpair:[a-z0-9_:]+", e)}
        assert used and used <= recorded, used - recorded
        names = {v["name"] for v in board["templating"]["list"]}
        assert {"datasource", "namespace", "instance"} <= names
        budget = json.loads((REPO / "runbooks" / name / "generated" / "budget.json").read_text())
        spec = budget["speculative"]
        text = "\n".join(exprs(board))
        for size in (spec["target_kv_bytes"], spec["draft_kv_bytes"],
                     spec["max_total_tokens"]):
            assert f"vector({size})" in text
        breakeven = json.loads((REPO / "runbooks" / name / "generated" /
                                "breakeven.json").read_text())
        assert f"vector({breakeven['slo']:g})" in text
        assert f"vector({breakeven['at_concurrency']['break_even']:g})" in text
        staging = json.loads((REPO / "runbooks" / name / "generated" /
                              "staging.json").read_text())
        assert f"vector({staging['budget_s']:g})" in text
        titles = " ".join(p["title"] for p in panels(board))
        assert "Memory" in titles and "Acceptance" in titles and "Cold start" in titles
        assert board["uid"] == f"specpair-{name}"[:40]
