"""The generated Prometheus rules, checked and evaluated by Prometheus's own promtool.

For every example pair: `promtool check rules` on the rule file and on the PrometheusRule's
groups, then `promtool test rules` with synthetic engine series built from the runbook's
thresholds, so that each alert fires in one case and stays quiet in another. The series
follow each engine's counter semantics (vLLM: drafts and accepted tokens; SGLang: verify
calls and generated tokens); which alert should fire follows from how far the synthetic
acceptance sits from the SLO and break-even, never from numbers the rules computed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from specpair.analyse.alerts import PAIR_LABEL
from specpair.analyse.analysis import Analysis
from specpair.analyse.monitoring import for_engine
from specpair.commands.build import load_pairs
from specpair.generate import dashboard_files, monitoring_files
from specpair.resolve.pair import ResolvedPair
from tests.support.kubernetes import workload
from tests.support.paths import REPO
from tests.support.prometheus_series import (
    EVAL,
    alert_rules,
    engine_counters,
    expect,
    gauges,
    ramp,
    series,
    where,
)
from tests.support.promtool import check_rules, rule_groups, run_unit_tests

PAIRS = {p.name: p for p in load_pairs(REPO)}
ALERTS = ("SpecpairAcceptanceBelowSLO", "SpecpairBelowBreakEven", "SpecpairSpeculationStopped",
          "SpecpairSpeculativeSeriesMissing", "SpecpairNotReadyWithinColdStartBudget")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("rules")
    paths = {}
    for name, pair in PAIRS.items():
        files = monitoring_files.generate(Analysis(pair))
        rules = folder / f"{name}.rules.yaml"
        rules.write_bytes(files[monitoring_files.RULES])
        manifest = files[monitoring_files.MANIFEST].decode()
        assert rule_groups(manifest) == rule_groups(rules.read_text())
        from_manifest = folder / f"{name}.manifest-groups.yaml"
        from_manifest.write_text(yaml.safe_dump({"groups": rule_groups(manifest)}))
        paths[name] = rules
        paths[f"{name}:manifest"] = from_manifest
    return paths


def test_promtool_accepts_every_generated_rule_file(generated: dict[str, Path]) -> None:
    assert {n for n in generated if ":" not in n} == set(PAIRS)
    for path in generated.values():
        out = check_rules(path)
        assert "SUCCESS" in out


def test_the_podmonitor_labels_every_series_with_the_pair() -> None:
    for name, pair in PAIRS.items():
        docs = list(yaml.safe_load_all(monitoring_files.generate(Analysis(pair))[
            monitoring_files.MANIFEST]))
        (monitor,) = [d for d in docs if d["kind"] == "PodMonitor"]
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        assert endpoint["relabelings"] == [{"action": "replace", "targetLabel": PAIR_LABEL,
                                            "replacement": name}]
        # the Deployment's pods carry the labels the monitor selects
        deployment = workload((REPO / "runbooks" / name / "generated" /
                                  "deployment.k8s.yaml").read_text())
        spec = deployment["spec"]
        template = spec.get("template") or spec["leaderWorkerTemplate"]["leaderTemplate"]
        pod_labels = template["metadata"]["labels"]
        selected = {k: v for k, v in monitor["spec"]["selector"]["matchLabels"].items()
                    if not k.startswith("leaderworkerset.")}
        assert selected.items() <= pod_labels.items()
        ports = [p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])]
        assert endpoint["port"] in ports


def scenarios(pair: ResolvedPair, rules: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    m = for_engine(pair.engine)
    t = Analysis(pair).thresholds
    name = pair.name
    top = max(tau for _, tau in t.curve)
    good = max(t.slo_min, top) + 1.0           # above the SLO and every break-even τ*
    low = max(1.0, t.slo_min - 0.3)            # below the SLO
    tests: list[dict[str, Any]] = []

    # healthy: nothing fires; the recorded τ is the synthetic one
    tests.append({
        "interval": "1m",
        "input_series": [*engine_counters(m, name, "a", good),
                         *gauges(m, name, "a", t.concurrency)],
        "alert_rule_test": [expect(rules, alert, []) for alert in ALERTS],
        "promql_expr_test": [
            {"expr": f"abs(specpair:acceptance_length:rate{w} - {good:g}) < bool 1e-9",
             "eval_time": EVAL, "exp_samples": [{"labels": "{" + f'{PAIR_LABEL}="{name}",'
                                                 'instance="a"}', "value": 1}]}
            for w in ("5m", "30m", "1h")]
        + [{"expr": f'specpair:kv_used_bytes{{pool="{pool}"}}', "eval_time": EVAL,
            "exp_samples": [{"labels": "{" + f'__name__="specpair:kv_used_bytes",'
                             f'{PAIR_LABEL}="{name}",instance="a",pool="{pool}"' + "}",
                             "value": size / 2}]}
           for pool, size in (("target", t.target_kv_bytes), ("draft", t.draft_kv_bytes))],
    })
    # below the SLO: the SLO alert fires
    tests.append({
        "interval": "1m",
        "input_series": [*engine_counters(m, name, "a", low),
                         *gauges(m, name, "a", t.concurrency)],
        "alert_rule_test": [expect(rules, "SpecpairAcceptanceBelowSLO", [where(name, "a")])],
    })
    # no draft token accepted at all (τ = 1): slower than the target alone, at any load
    tests.append({
        "interval": "1m",
        "input_series": [*engine_counters(m, name, "a", 1.0),
                         *gauges(m, name, "a", t.concurrency)],
        "alert_rule_test": [expect(rules, "SpecpairBelowBreakEven", [where(name, "a")])],
    })
    # τ between the break-even at the lowest and the highest load of the curve: the
    # alert follows the running concurrency of each server
    (c_low, tau_low), (c_high, tau_high) = t.curve[0], t.curve[-1]
    if abs(tau_low - tau_high) > 0.01:
        mid = (tau_low + tau_high) / 2
        slow = "a" if tau_low > tau_high else "b"
        tests.append({
            "interval": "1m",
            "input_series": [*engine_counters(m, name, "a", mid), *gauges(m, name, "a", c_low),
                             *engine_counters(m, name, "b", mid),
                             *gauges(m, name, "b", c_high * 2)],
            "alert_rule_test": [expect(rules, "SpecpairBelowBreakEven", [where(name, slow)])],
        })
    # fallback: tokens flow, the verify counter stands still
    tests.append({
        "interval": "1m",
        "input_series": [*engine_counters(m, name, "a", None),
                         *engine_counters(m, name, "b", good),
                         *gauges(m, name, "a", 4), *gauges(m, name, "b", 4)],
        "alert_rule_test": [expect(rules, "SpecpairSpeculationStopped", [where(name, "a")]),
                            expect(rules, "SpecpairSpeculativeSeriesMissing", [])],
    })
    # fallback: no speculative series at all on server a
    tests.append({
        "interval": "1m",
        "input_series": [series(m.generated_tokens, "a", ramp(600), name),
                         *engine_counters(m, name, "b", good),
                         *gauges(m, name, "a", 4), *gauges(m, name, "b", 4)],
        "alert_rule_test": [expect(rules, "SpecpairSpeculativeSeriesMissing", [where(name, "a")]),
                            expect(rules, "SpecpairSpeculationStopped", [])],
    })
    # cold start: a never answers within the budget, b answers 3 minutes before it ends
    budget_min = int(t.cold_start_budget_s // 60)
    late = budget_min + 3
    tests.append({
        "interval": "1m",
        "input_series": [
            series("up", "a", f"0+0x{late + 2}", name, job="engine"),
            series("up", "b", f"0+0x{budget_min - 3} 1+0x{6}", name, job="engine")],
        "alert_rule_test": [expect(rules, "SpecpairNotReadyWithinColdStartBudget",
                                   [where(name, "a", job="engine")], at=f"{late}m")],
    })
    if m.startup_seconds:
        metric, extra = m.startup_seconds
        key, value = extra.split("=")
        tests.append({
            "interval": "1m",
            "input_series": [
                series(metric, "a", f"{t.cold_start_budget_s * 2:g}+0x10", name,
                       **{key: value.strip('"')}),
                series(metric, "b", f"{t.cold_start_budget_s / 2:g}+0x10", name,
                       **{key: value.strip('"')})],
            "alert_rule_test": [expect(rules, "SpecpairEngineStartupOverBudget",
                                       [where(name, "a")], at="5m")],
        })
    if m.process_start and m.requests_done:
        # The process starts at 10m. a serves its first request 5 minutes after the budget,
        # b after 2 minutes; c is a restart whose earlier process had served requests; d
        # is scraped only from after its first request (a late-joining Prometheus: its
        # first sample is already above 0, so the time of the first request is unknown);
        # e is seen at 0 once, then not scraped until after the budget (only an upper
        # bound past the budget, so no alert); f restarts with its earlier process's
        # last sample still inside the lookback while the new one boots unscraped.
        wait = budget_min + 4
        end = 10 + wait + 1 + 3
        rest = end - 10 - wait
        joins = 10 + wait + 2
        tests.append({
            "interval": "1m",
            "input_series": [
                series(m.process_start, "a", f"_x10 600+0x{end - 10}", name),
                series(m.requests_done, "a", f"_x10 0+0x{wait} 1+1x{rest - 1}", name),
                series(m.process_start, "b", f"_x10 600+0x{end - 10}", name),
                series(m.requests_done, "b", f"_x10 0+0x1 1+1x{end - 12}", name),
                series(m.process_start, "c", f"0+0x9 600+0x{end - 10}", name),
                series(m.requests_done, "c", f"0 1+1x8 0+0x{wait} 1+1x{rest - 1}", name),
                series(m.process_start, "d", f"_x{joins} 600+0x{end - joins}", name),
                series(m.requests_done, "d", f"_x{joins} 7+1x{end - joins}", name),
                series(m.process_start, "e", f"_x10 600 _x{wait + 1} 600+0x{rest - 2}", name),
                series(m.requests_done, "e", f"_x10 0 _x{wait + 1} 3+1x{rest - 2}", name),
                series(m.process_start, "f", f"0+0x9 600+0x{end - 10}", name),
                series(m.requests_done, "f", f"0 1+1x8 _x2 0+0x{wait - 2} 1+1x{rest - 1}",
                       name)],
            "alert_rule_test": [expect(rules, "SpecpairFirstRequestOverColdStartBudget",
                                       [where(name, i) for i in "acf"], at=f"{end}m")],
            "promql_expr_test": [{
                "expr": "specpair:time_to_first_request_seconds", "eval_time": f"{end}m",
                "exp_samples": [
                    {"labels": "{" + f'__name__="specpair:time_to_first_request_seconds",'
                     f'{PAIR_LABEL}="{name}",instance="{i}"' + "}", "value": v}
                    for i, v in (("a", (wait + 1) * 60), ("b", 120),
                                 ("c", (wait + 1) * 60), ("e", (wait + 2) * 60),
                                 ("f", (wait + 1) * 60))]}],
        })
    return tests


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_each_alert_fires_and_stays_quiet(name: str, generated: dict[str, Path],
                                          tmp_path: Path) -> None:
    pair = PAIRS[name]
    rules = alert_rules(rule_groups(generated[name].read_text()))
    assert set(ALERTS) <= set(rules)
    tests = scenarios(pair, rules)
    covered = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    assert covered == set(rules), "every alert of the file has a case"
    result = run_unit_tests(generated[name], tests, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_a_failing_expectation_fails_promtool(generated: dict[str, Path], tmp_path: Path) -> None:
    """The harness can fail: claim the SLO alert fires on a healthy server."""
    name = "llama31-8b-eagle3"
    pair = PAIRS[name]
    rules = alert_rules(rule_groups(generated[name].read_text()))
    t = Analysis(pair).thresholds
    m = for_engine(pair.engine)
    wrong = [{"interval": "1m",
              "input_series": [*engine_counters(m, name, "a", t.slo_min + 1),
                               *gauges(m, name, "a", t.concurrency)],
              "alert_rule_test": [expect(rules, "SpecpairAcceptanceBelowSLO",
                                         [where(name, "a")])]}]
    result = run_unit_tests(generated[name], wrong, tmp_path)
    assert result.returncode != 0
    assert "SpecpairAcceptanceBelowSLO" in result.stdout + result.stderr


def test_a_runbook_change_shows_in_the_rules() -> None:
    pair = PAIRS["llama31-8b-eagle3"]
    before = monitoring_files.generate(Analysis(pair))[monitoring_files.RULES].decode()
    slo = pair.runbook.acceptance.slo.model_copy(update={"min_length": 3.25})
    acceptance = pair.runbook.acceptance.model_copy(update={"slo": slo})
    changed = pair.model_copy(update={"runbook": pair.runbook.model_copy(
        update={"acceptance": acceptance})})
    after = monitoring_files.generate(Analysis(changed))[monitoring_files.RULES].decode()
    assert "< 3.25" in after and "< 3.25" not in before


def test_a_multi_node_pair_scrapes_only_the_leader() -> None:
    """LeaderWorkerSet labels each pod with its worker index; the leader is "0" and the
    only pod serving HTTP, so workers must not be scraped (they would read as down)."""
    pair = PAIRS["llama31-8b-eagle3"]
    deployment = pair.runbook.deployment.model_copy(update={"nodes": 2})
    two = pair.model_copy(update={"runbook": pair.runbook.model_copy(
        update={"deployment": deployment})})
    match = monitoring_files.pod_monitor(two)["spec"]["selector"]["matchLabels"]
    assert match["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    single = monitoring_files.pod_monitor(pair)["spec"]["selector"]["matchLabels"]
    assert "leaderworkerset.sigs.k8s.io/worker-index" not in single


LONG = 9 * 60  # minutes: past the 6-hour windows, where a subquery's edge shows
RESTART = 400  # minutes: a restart after the first 6 hours


def long_horizon(pair: ResolvedPair, rules: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Servers up for 9 hours: every alert stays quiet on a healthy one at 6h30, 7h, 8h and
    9h, every record still answers, and a late first request is reported, then let go
    once its process's start leaves the 6-hour window (not turned into uptime - 6h)."""
    m = for_engine(pair.engine)
    t = Analysis(pair).thresholds
    name = pair.name
    good = max(t.slo_min, *(tau for _, tau in t.curve)) + 1.0
    late = int(t.cold_start_budget_s // 60) + 5
    inputs = [*engine_counters(m, name, "a", good, minutes=LONG),
              *gauges(m, name, "a", t.concurrency, minutes=LONG)]
    if m.process_start and m.requests_done:
        # a: first request 2 minutes after its start; b: 5 minutes after the budget
        inputs += [series(m.process_start, "a", f"0+0x{LONG}", name),
                   series(m.requests_done, "a", f"0+0x1 1+1x{LONG - 2}", name),
                   series(m.process_start, "b", f"0+0x{LONG}", name),
                   series(m.requests_done, "b", f"0+0x{late} 1+1x{LONG - late - 1}", name),
                   # c serves from its first minute, restarts at 400m (6 h 40 min) and
                   # then serves its first request 5 minutes after the budget
                   series(m.process_start, "c", f"0+0x{RESTART - 1} "
                          f"{RESTART * 60}+0x{LONG - RESTART}", name),
                   series(m.requests_done, "c", f"0+1x{RESTART - 1} 0+0x{late} "
                          f"1+1x{LONG - RESTART - late - 1}", name),
                   # d restarts at 400m too and serves within 3 minutes, but this
                   # Prometheus scrapes it only from after the budget (late-joining)
                   series(m.process_start, "d", f"_x{RESTART + late} "
                          f"{RESTART * 60}+0x{LONG - RESTART - late}", name),
                   series(m.requests_done, "d", f"_x{RESTART + late} "
                          f"40+1x{LONG - RESTART - late}", name)]
    if m.startup_seconds:
        metric, extra = m.startup_seconds
        key, value = extra.split("=")
        inputs.append(series(metric, "a", f"{t.cold_start_budget_s / 2:g}+0x{LONG}", name,
                             **{key: value.strip('"')}))
    times = ("390m", "420m", "480m", f"{LONG}m")
    late_alert = "SpecpairFirstRequestOverColdStartBudget"
    checks = [expect(rules, alert, []) for alert in rules if alert != late_alert]
    checks = [{**case, "eval_time": at} for at in times for case in checks]
    exprs: list[dict[str, Any]] = [
        {"expr": f"abs(specpair:acceptance_length:rate{w} - {good:g}) < bool 1e-9",
         "eval_time": at, "exp_samples": [{"labels": "{" + f'{PAIR_LABEL}="{name}",'
                                           'instance="a"}', "value": 1}]}
        for w in ("5m", "30m", "1h", "6h") for at in times]
    exprs += [{"expr": "specpair:running_requests:avg5m", "eval_time": at, "exp_samples": [
        {"labels": "{" + f'__name__="specpair:running_requests:avg5m",{PAIR_LABEL}="{name}",'
         'instance="a"}', "value": t.concurrency}]} for at in times]
    # break-even values are the short scenarios' business; here: the record still answers
    exprs += [{"expr": "specpair:break_even_tau > bool 0", "eval_time": at, "exp_samples": [
        {"labels": "{" + f'{PAIR_LABEL}="{name}",instance="a"' + "}", "value": 1}]}
        for at in times]
    if late_alert in rules:
        record = "specpair:time_to_first_request_seconds"
        checks += [expect(rules, late_alert, [where(name, "b")], at=at)
                   for at in ("60m", "300m")]
        exprs += [{"expr": record, "eval_time": "300m", "exp_samples": [
            {"labels": "{" + f'__name__="{record}",{PAIR_LABEL}="{name}",instance="{i}"}}',
             "value": v} for i, v in (("a", 120), ("b", (late + 1) * 60), ("c", 60))]}]
        # past 6 h only c's process restarted at 400m is inside its window, from the
        # first scrape that saw its first request
        served = RESTART + late + 1
        for at in times:
            minute = int(at.removesuffix("m"))
            seen = [where(name, "c")] if minute >= served else []
            checks.append(expect(rules, late_alert, seen, at=at))
            exprs.append({"expr": record, "eval_time": at, "exp_samples": [
                {"labels": "{" + f'__name__="{record}",{PAIR_LABEL}="{name}",instance="c"}}',
                 "value": (late + 1) * 60}] if seen else []})
    return [{"interval": "1m", "input_series": inputs, "alert_rule_test": checks,
             "promql_expr_test": exprs}]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_every_rule_holds_over_nine_hours(name: str, generated: dict[str, Path],
                                          tmp_path: Path) -> None:
    rules = alert_rules(rule_groups(generated[name].read_text()))
    tests = long_horizon(PAIRS[name], rules)
    covered = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    assert covered == set(rules), "every alert of the file is checked at 7 h and later"
    result = run_unit_tests(generated[name], tests, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_vllm_data_parallel_has_no_first_request_rule() -> None:
    """Several vLLM API servers use the multiprocess registry: no process start time."""
    pair = PAIRS["llama31-8b-qwen25-tli-vllm"]
    deployment = pair.runbook.deployment.model_copy(update={
        "parallel": pair.runbook.deployment.parallel.model_copy(update={"data": 2})})
    dp = pair.model_copy(update={"runbook": pair.runbook.model_copy(
        update={"deployment": deployment})})
    text = monitoring_files.generate(Analysis(dp))[monitoring_files.RULES].decode()
    names = {r.get("alert") or r.get("record") for g in rule_groups(text) for r in g["rules"]}
    assert "SpecpairFirstRequestOverColdStartBudget" not in names
    assert "specpair:time_to_first_request_seconds" not in names
    assert "multiprocess registry" in text.split("groups:")[0]
    single = monitoring_files.generate(Analysis(pair))[monitoring_files.RULES].decode()
    assert "SpecpairFirstRequestOverColdStartBudget" in single
    # nor does its dashboard query a record that is not generated
    board = dashboard_files.generate(Analysis(dp))[dashboard_files.DASHBOARD].decode()
    assert "specpair:time_to_first_request_seconds" not in board
    board = dashboard_files.generate(Analysis(pair))[dashboard_files.DASHBOARD].decode()
    assert "specpair:time_to_first_request_seconds" in board


def phases(per_minute: list[tuple[int, float]]) -> str:
    """A counter's samples, one a minute: (minutes, increase per minute) phase by phase."""
    values, total = [0.0], 0.0
    for minutes, rate in per_minute:
        for _ in range(minutes):
            total += rate
            values.append(total)
    return " ".join(f"{v:.6g}" for v in values)


WINDOWED = {"slo_window": "10m", "slo_lookback": "30m", "slo_for": "5m",
            "break_even_window": "10m", "break_even_for": "5m"}


@pytest.mark.parametrize(("name", "windows"), [
    ("llama31-8b-eagle3", None), ("llama33-70b-eagle3-vllm", None),
    ("qwen3-8b-dflash", WINDOWED)], ids=["sglang", "vllm", "runbook-windows"])
def test_the_stated_detection_delays_hold_in_promtool(name: str, windows: dict[str, str] | None,
                                                      tmp_path: Path) -> None:
    """Two healthy hours, two at τ = 1 (below the SLO and every τ*), two healthy again:
    each alert fires by the delay the rule file states and clears by the one it states."""
    from specpair.analyse.alerts import delays
    from tests.support.pairs import with_runbook

    pair = with_runbook(PAIRS[name], alerts=windows) if windows else PAIRS[name]
    files = monitoring_files.generate(Analysis(pair))
    text = files[monitoring_files.RULES].decode()
    rules_path = tmp_path / "rules.yaml"
    rules_path.write_bytes(files[monitoring_files.RULES])
    rules = alert_rules(rule_groups(text))
    m = for_engine(pair.engine)
    t = Analysis(pair).thresholds
    good = max(t.slo_min, *(tau for _, tau in t.curve)) + 1.0
    hour = 120
    steps = [(hour, 600 / good), (hour, 600.0), (hour, 600 / good)]
    inputs = [series(m.generated_tokens, "a", phases([(n, 600.0) for n, _ in steps]), name),
              series(m.verify_steps, "a", phases(steps), name),
              *gauges(m, name, "a", t.concurrency, minutes=3 * hour)]
    if m.accepted is not None:
        inputs.append(series(m.accepted, "a", phases([(n, r * (600 / r - 1)) for n, r in steps]),
                             name))
    cases = []
    for delay in delays(pair):
        assert f"within {delay.pages_within_s // 60} min" in text or delay.pages_within_s >= 5400
        fire = hour + -(-delay.pages_within_s // 60) + 1
        clear = 2 * hour + -(-delay.clears_within_s // 60) + 1
        cases += [expect(rules, delay.alert, [where(name, "a")], at=f"{fire}m"),
                  expect(rules, delay.alert, [], at=f"{clear}m"),
                  expect(rules, delay.alert, [], at=f"{hour - 1}m")]
    result = run_unit_tests(rules_path, [{"interval": "1m", "input_series": inputs,
                                          "alert_rule_test": cases}], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
