"""generated/canary.py and canary.json: the canary a deployment runs without specpair is
the code `specpair canary` runs, with the pair's own threshold and pinned requests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specpair.analyse.analysis import Analysis
from specpair.bench import canary_probe
from specpair.generate import canary_files
from tests.support.canary_standin import Behaviour, standin
from tests.support.geometries import dense
from tests.support.pairs import make_pair
from tests.support.paths import REPO
from tests.support.promtool import check_rules, rule_groups, run_unit_tests

EXAMPLES = sorted(p.parents[1].name for p in (REPO / "runbooks").glob("*/generated/canary.json"))


def test_every_example_has_a_canary() -> None:
    pairs = sorted(p.name for p in (REPO / "runbooks").iterdir()
                   if (p / "generated").is_dir())
    assert pairs == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_generated_canary_is_the_command_s_code_and_the_pair_s_threshold(
        name: str) -> None:
    generated = REPO / "runbooks" / name / "generated"
    assert (generated / "canary.py").read_bytes() == Path(canary_probe.__file__).read_bytes()
    config = json.loads((generated / "canary.json").read_text())
    canary_probe.check_config(config)
    here = json.loads((generated / "breakeven.json").read_text())["at_concurrency"]
    threshold = config["threshold"]
    assert threshold["break_even"] == here["break_even"]
    assert threshold["min_tau"] == pytest.approx(here["break_even"] * (1 + threshold["margin"]),
                                                 abs=1e-4)
    assert config["concurrency"] == here["concurrency"]
    # a τ* from a prior (no published points of the drafter family) says so, as
    # breakeven.json does, with breakeven.json's interval; a fitted one says nothing
    uncertainty = json.loads((generated / "breakeven.json").read_text())["uncertainty"]
    if uncertainty["few_points"]:
        lo, hi = here["break_even_range"]
        assert f"τ* interval {lo:g}–{hi:g}" in threshold["unverified"]
    else:
        assert "unverified" not in threshold
    # pinned and bounded: greedy, at most the canary's tokens; per class the runbook's 4
    # requests, or as many as the concurrency where that is more (the workloads hold more)
    bodies = [r["body"] for c in config["classes"] for r in c["requests"]]
    assert {b["temperature"] for b in bodies} == {0}
    assert max(b["max_tokens"] for b in bodies) <= 64
    assert [len(c["requests"]) for c in config["classes"]] == [max(4, here["concurrency"])] * 2
    assert len(bodies) <= canary_probe.MAX_REQUESTS


def test_the_report_and_a_failed_tau_say_an_unverified_threshold() -> None:
    """The SGLang pair's prior τ* (its mark), on a vLLM pair's canary: the stand-in speaks
    vLLM's counters."""
    prior = json.loads((REPO / "runbooks" / "qwen3-8b-dflash" / "generated" / "canary.json")
                       .read_text())["threshold"]["unverified"]
    config = json.loads((REPO / "runbooks" / "llama33-70b-eagle3-vllm-0-32-0" / "generated"
                         / "canary.json").read_text())
    config["threshold"]["unverified"] = prior
    with standin(Behaviour(steps=10, accepted=1)) as url:  # τ 1.1, below the floor
        report = canary_probe.run(canary_probe.check_config(config), url)
    assert report["threshold"]["unverified"] == config["threshold"]["unverified"]
    taus = [r for r in report["reasons"] if r["check"] == "tau"]
    assert taus and all("τ* unverified" in r["message"] for r in taus)


def test_the_generated_file_runs_alone_without_specpair(tmp_path: Path) -> None:
    """canary.py copied to a folder of its own and run isolated (`-I`: no user site, no
    PYTHONPATH), as a pod without specpair runs it."""
    generated = REPO / "runbooks" / "llama33-70b-eagle3-vllm-0-32-0" / "generated"
    shutil.copy(generated / "canary.py", tmp_path / "canary.py")
    config = (generated / "canary.json").read_text()
    for behaviour, status in ((Behaviour(steps=10, accepted=20), 0),
                              (Behaviour(speculative=False), 4)):
        with standin(behaviour) as url:
            done = subprocess.run([sys.executable, "-I", "canary.py", "--url", url],
                                  input=config, capture_output=True, text=True,
                                  cwd=tmp_path, timeout=120, check=False)
        assert done.returncode == status, done.stderr
        assert json.loads(done.stdout)["verdict"] == ("pass" if status == 0 else "fail")


@pytest.mark.parametrize("name", EXAMPLES)
def test_promtool_accepts_the_canary_rules(name: str) -> None:
    generated = REPO / "runbooks" / name / "generated"
    assert "SUCCESS: 2 rules found" in check_rules(generated / "canary-rules.yaml")
    # the PrometheusRule holds the same group (the CRD schema: test_manifests.py)
    assert rule_groups((generated / "canary-monitoring.k8s.yaml").read_text()) == rule_groups(
        (generated / "canary-rules.yaml").read_text())


def test_the_canary_alerts_name_the_reason_and_what_serves(tmp_path: Path) -> None:
    """promtool evaluates the rules on the series the gate serves (canary_probe's
    verdict_metrics, relabelled with the pair as the PodMonitor does)."""
    name = "llama33-70b-eagle3-vllm-0-32-0"
    rules = REPO / "runbooks" / name / "generated" / "canary-rules.yaml"
    report = {"pair": name, "reasons": [{"check": "tau", "class": "long-diverse", "depth": 3}]}

    def series(state: str, instance: str) -> list[dict[str, str]]:
        out = []
        for line in canary_probe.verdict_metrics(report, state).splitlines():
            if line.startswith("specpair_canary_") and "_tau" not in line.split("{")[0]:
                metric, value = line.rsplit(" ", 1)
                labels = metric.replace("{", f'{{specpair_pair="{name}",instance="{instance}",')
                out.append({"series": labels, "values": f"{value}x10"})
        return out

    labels = {"specpair_pair": name, "instance": "a", "pair": name, "check": "tau",
              "class": "long-diverse", "depth": "3"}
    annotations = {}
    for rule in rule_groups(rules.read_text())[0]["rules"]:
        text = rule["annotations"]["description"]
        for key in ("check", "class", "depth"):
            text = text.replace(f"{{{{ $labels.{key} }}}}", labels[key])
        assert "failed: tau, class long-diverse, depth 3 " in text  # the reason, named
        annotations[rule["alert"]] = {**rule["annotations"], "description": text}

    def fired(alert: str, severity: str) -> dict[str, object]:
        return {"exp_labels": {**labels, "severity": severity},
                "exp_annotations": annotations[alert]}

    tests = [{"interval": "1m",
              "input_series": [*series("fallback", "a"), *series("speculative", "b")],
              "alert_rule_test": [
                  {"eval_time": "5m", "alertname": "SpecpairCanaryFallback", "exp_alerts": [
                      fired("SpecpairCanaryFallback", "warning")]},
                  {"eval_time": "5m", "alertname": "SpecpairCanaryFailed", "exp_alerts": []}]},
             {"interval": "1m", "input_series": series("failed", "a"),
              "alert_rule_test": [
                  {"eval_time": "5m", "alertname": "SpecpairCanaryFailed", "exp_alerts": [
                      fired("SpecpairCanaryFailed", "critical")]}]}]
    result = run_unit_tests(rules, tests, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_schedule_that_drafts_nothing_at_the_concurrency_moves_the_canary() -> None:
    """K = 0 from 5 running requests on: at the deployment's 16 the canary would see no
    draft, so it runs at 4 (the largest concurrency that drafts), at K = 3, against τ* of
    the curve there."""
    draft = dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle3"})
    pair = make_pair(dense(32), draft, engine="vllm", version="0.33.0", speculation={
        "method": "EAGLE3", "num_speculative_tokens": 3,
        "schedule": [{"start": 1, "end": 4, "k": 3}, {"start": 5, "end": 64, "k": 0}]},
        deployment={"concurrency": 16, "max_running_requests": 64})
    analysis = Analysis(pair)
    config = canary_files.config(analysis)
    assert (config["concurrency"], config["depth"]) == (4, 3)
    assert "drafts nothing at concurrency 16" in config["concurrency_note"]
    curve = {p.concurrency: p.break_even for p in analysis.latency.curve}
    assert config["threshold"]["break_even"] == curve[4]
    assert "at concurrency 4 " in config["threshold"]["source"]
    # enough requests per class to run at 4 (the runbook's 4 already)
    assert {len(c["requests"]) for c in config["classes"]} == {4}


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_dashboard_shows_what_serves_after_the_canary(name: str) -> None:
    board = json.loads((REPO / "runbooks" / name / "generated" / "dashboard.grafana.json")
                       .read_text())
    (panel,) = [p for p in board["panels"] if p["title"] == "What serves after the canary"]
    exprs = [t["expr"] for t in panel["targets"]]
    assert any(e.startswith("max by (instance, state) (specpair_canary_state{"
                            f'specpair_pair="{name}"') for e in exprs), exprs
    assert any("specpair_canary_reason{" in e for e in exprs), exprs
    # the served series' labels (canary_probe.verdict_metrics) are the ones it groups by
    served = canary_probe.verdict_metrics(
        {"pair": name, "reasons": [{"check": "tau", "class": "c", "depth": 3}]}, "fallback")
    assert 'state="fallback"} 1' in served and 'check="tau",class="c",depth="3"' in served
