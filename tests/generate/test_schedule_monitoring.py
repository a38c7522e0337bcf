"""Acceptance alerts under a speculation schedule, evaluated by promtool (issue 32).

A schedule shortens the draft as the load grows, and τ per verify step falls with it
although no draft got worse. The rules judge τ against the SLO at the depth the engine is
running (vLLM: drafted tokens per draft; SGLang: its current-steps gauge). The synthetic
servers draft with i.i.d. per-position acceptance α, so their τ at depth K is Leviathan et
al.'s (1 − α^{K+1}) / (1 − α): which alert fires follows from α against the SLO's α, never
from numbers the rules computed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specpair.analyse.acceptance import solve_alpha
from specpair.analyse.analysis import Analysis
from specpair.analyse.monitoring import for_engine
from specpair.analyse.plan.variants import variant
from specpair.generate import monitoring_files
from specpair.resolve.pair import ResolvedPair
from tests.support.examples import example
from tests.support.prometheus_series import (
    EVAL,
    MINUTES,
    alert_rules,
    expect,
    gauges,
    ramp,
    series,
    where,
)
from tests.support.promtool import rule_groups, run_unit_tests


def geometric(alpha: float, k: int) -> float:
    return sum(alpha ** i for i in range(k + 1))


def scheduled_pair() -> ResolvedPair:
    return variant(example("llama33-70b-eagle3-vllm"),
                   {("deployment", "max_running_requests"): 256,
                    ("speculation", "schedule"): [
                        {"start": 1, "end": 16, "k": 3}, {"start": 17, "end": 64, "k": 1},
                        {"start": 65, "end": 256, "k": 0}]})


def server(pair: ResolvedPair, instance: str, alpha: float, k: int, running: int,
           drafts_per_minute: float = 300) -> list[dict[str, str]]:
    """A vLLM server drafting K tokens per step at per-position acceptance α."""
    m = for_engine(pair.engine)
    assert m.accepted is not None and m.draft_depth is not None
    tau = geometric(alpha, k)
    return [series(m.generated_tokens, instance, ramp(drafts_per_minute * tau), pair.name),
            series(m.verify_steps, instance, ramp(drafts_per_minute), pair.name),
            series(m.accepted, instance, ramp(drafts_per_minute * (tau - 1)), pair.name),
            series(m.draft_depth[1], instance, ramp(drafts_per_minute * k), pair.name),
            *gauges(m, pair.name, instance, running)]


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    pair = scheduled_pair()
    files = monitoring_files.generate(Analysis(pair))
    path = tmp_path_factory.mktemp("rules") / "scheduled.rules.yaml"
    path.write_bytes(files[monitoring_files.RULES])
    return path, alert_rules(rule_groups(path.read_text()))


def test_a_scheduled_drop_in_k_raises_nothing_a_drop_per_depth_alerts(
        rules: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, found = rules
    pair = scheduled_pair()
    slo = pair.runbook.acceptance.slo.min_length
    alpha_slo = solve_alpha(slo, 3)  # the SLO is written at the runbook's depth, K = 3
    good, poor = alpha_slo + 0.08, alpha_slo - 0.15
    # the control: at K = 1 the healthy server's τ is below the SLO as written
    assert geometric(good, 1) < slo < geometric(good, 3)
    tests = [{
        "interval": "1m",
        "input_series": [
            *server(pair, "low-load", good, 3, 8),     # schedule: K = 3 up to 16
            *server(pair, "high-load", good, 1, 48),   # schedule: K = 1 from 17 to 64
            *server(pair, "regressed", poor, 1, 48)],  # same depth, worse draft
        "alert_rule_test": [expect(found, "SpecpairAcceptanceBelowSLO",
                                   [where(pair.name, "regressed")])],
    }, {
        "interval": "1m",
        "input_series": [*server(pair, "deep-regressed", poor, 3, 8)],
        "alert_rule_test": [expect(found, "SpecpairAcceptanceBelowSLO",
                                   [where(pair.name, "deep-regressed")])],
    }]
    result = run_unit_tests(path, tests, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert int(EVAL.rstrip("m")) < MINUTES


def test_without_a_depth_series_the_written_slo_applies(
        rules: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, found = rules
    pair = scheduled_pair()
    m = for_engine(pair.engine)
    assert m.accepted is not None
    slo = pair.runbook.acceptance.slo.min_length
    name = pair.name

    def plain(instance: str, tau: float) -> list[dict[str, str]]:
        return [series(m.generated_tokens, instance, ramp(300 * tau), name),
                series(m.verify_steps, instance, ramp(300), name),
                series(m.accepted, instance, ramp(300 * (tau - 1)), name),
                *gauges(m, name, instance, 8)]

    tests = [{"interval": "1m",
              "input_series": [*plain("above", slo + 0.3), *plain("below", slo - 0.3)],
              "alert_rule_test": [expect(found, "SpecpairAcceptanceBelowSLO",
                                         [where(name, "below")])]}]
    result = run_unit_tests(path, tests, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
