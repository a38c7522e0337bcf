"""The speedup the dashboard and the site plot is the verdict's "expected speedup": the
same step times through `StepTimes.speedup`, evaluated by Prometheus (promtool) for the
dashboard's record and read off the chart's data for the site, then compared with the
number the verdict prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specpair.analyse.alerts import PAIR_LABEL
from specpair.analyse.analysis import Analysis
from specpair.analyse.budget import compute
from specpair.analyse.latency import model
from specpair.analyse.monitoring import for_engine
from specpair.commands.build import load_pairs
from specpair.generate import charts, dashboard_files, monitoring_files
from tests.support.paths import REPO
from tests.support.prometheus_series import engine_counters, gauges
from tests.support.promtool import run_unit_tests

PAIRS = {p.name: p for p in load_pairs(REPO)}


def verdict_speedup(name: str) -> float:
    """The "expected speedup N×" of the pair's verdict, as the plan output prints it."""
    text = (REPO / "runbooks" / name / "generated" / "breakeven.md").read_text()
    found = re.search(r"expected speedup (?:at the SLO )?(\d+\.\d+)×", text)
    assert found, f"{name}: no expected speedup in breakeven.md"
    return float(found.group(1))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_recorded_speedup_is_the_verdicts_at_the_slo(name: str, tmp_path: Path) -> None:
    pair = PAIRS[name]
    t = Analysis(pair).thresholds
    m = for_engine(pair.engine)
    latency = model(pair, compute(pair))
    rules = tmp_path / "rules.yaml"
    rules.write_bytes(monitoring_files.generate(Analysis(pair))[monitoring_files.RULES])
    expected = latency.at_concurrency.speedup_at_slo
    if latency.slo_ok:  # else the verdict says "slower than the target alone", no number
        assert abs(expected - verdict_speedup(name)) < 0.006
    test = {"interval": "1m",
            "input_series": [*engine_counters(m, name, "a", t.slo_min),
                             *gauges(m, name, "a", t.concurrency)],
            "promql_expr_test": [{
                "expr": f"abs(specpair:modelled_speedup - {expected!r}) < bool 1e-3",
                "eval_time": "100m",
                "exp_samples": [{"labels": "{" + f'{PAIR_LABEL}="{name}",instance="a"' + "}",
                                 "value": 1}]}]}
    result = run_unit_tests(rules, [test], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_plots_the_recorded_speedup() -> None:
    for name, pair in PAIRS.items():
        board = json.loads(dashboard_files.generate(Analysis(pair))[dashboard_files.DASHBOARD])
        (panel,) = [p for p in board["panels"] if p.get("title", "").startswith("Speedup")]
        (target,) = panel["targets"]
        assert target["expr"].startswith("specpair:modelled_speedup{"), name
        assert "break_even_tau" not in target["expr"]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_site_chart_passes_through_the_verdict(name: str) -> None:
    pair = PAIRS[name]
    latency = model(pair, compute(pair))
    lines = {point.concurrency: dict(line) for point, line in charts.speedup_lines(latency)}
    at_slo = lines[latency.concurrency][latency.slo]
    assert abs(at_slo - latency.at_concurrency.speedup_at_slo) < 1e-3
    if latency.slo_ok:
        assert abs(at_slo - verdict_speedup(name)) < 0.006
    # S(1) < 1: one token per step costs a draft on top of the verify
    assert all(line[min(line)] < 1 for line in lines.values())
