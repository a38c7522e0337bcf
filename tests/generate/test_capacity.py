"""Capacity that follows live acceptance: the recording rules evaluated by Prometheus's own
promtool, and the KEDA ScaledObject against KEDA's own CRD schema.

The expected capacities never restate the rule: at τ = the SLO a replica serves B tokens per
TPOT, B·1000 / `tpot_ms_at_slo` of the pair's committed breakeven.json (with its interval
from `tpot_ms_at_slo_range`); at τ = τ* speculation only breaks even, so it serves what the
target alone serves, B / `t_decode_s`; a replica that reports no τ counts at that figure with
the throughput band of `uncertainty.throughput_ratio`. The counters drop acceptance from
the SLO to τ* and then to 1 at a constant served token rate, so capacity must fall and the
replicas demand needs must rise.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from specpair.analyse.alerts import PAIR_LABEL
from specpair.analyse.analysis import Analysis
from specpair.analyse.monitoring import EngineMetrics, for_engine
from specpair.commands.build import load_pairs
from specpair.generate import autoscaler_files, monitoring_files
from specpair.model.autoscaling import Autoscaling
from specpair.resolve.pair import ResolvedPair
from tests.support.kubernetes import api_name_problems, documents, validate, workload
from tests.support.multinode import vllm_two_nodes
from tests.support.paths import REPO
from tests.support.prometheus_series import series
from tests.support.promtool import check_rules, rule_groups, run_unit_tests

PAIRS = {p.name: p for p in load_pairs(REPO)}
CAPACITY = "specpair:replica_token_capacity:rate5m"
REPLICAS = "specpair:desired_replicas:rate5m"
SEGMENT = 40  # minutes at each acceptance length
TOLERANCE = 2e-3  # relative: breakeven.json rounds TPOT to 3 decimals and τ* to 4


def generated(name: str, file: str) -> str:
    return (REPO / "runbooks" / name / "generated" / file).read_text()


def breakeven(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(generated(name, "breakeven.json"))
    return data


def counter(per_minute: list[float]) -> str:
    """promtool's expanding notation for a counter that grows by each rate for SEGMENT
    minutes, continuing where the previous segment ended."""
    parts, value = [], 0.0
    for i, rate in enumerate(per_minute):
        start = value if i == 0 else value + rate
        steps = SEGMENT if i == 0 else SEGMENT - 1
        parts.append(f"{start!r}+{rate!r}x{steps}")
        value = start + rate * steps
    return " ".join(parts)


def dropping(m: EngineMetrics, pair: str, instance: str, taus: list[float],
             tokens_per_minute: float) -> list[dict[str, str]]:
    """A server at a constant token rate whose acceptance length steps through `taus`
    (SGLang: verify calls = tokens / τ; vLLM: drafts = tokens / τ, accepted = drafts·(τ−1))."""
    steps = [tokens_per_minute / tau for tau in taus]
    out = [series(m.generated_tokens, instance, counter([tokens_per_minute] * len(taus)), pair),
           series(m.verify_steps, instance, counter(steps), pair)]
    if m.accepted is not None:
        out.append(series(m.accepted, instance,
                          counter([s * (tau - 1) for s, tau in zip(steps, taus, strict=True)]),
                          pair))
    return out


def close(expr: str, expected: float, labels: dict[str, str], at: str) -> dict[str, Any]:
    return {"expr": f"abs({expr} / {expected!r} - 1) < bool {TOLERANCE}", "eval_time": at,
            "exp_samples": [{"labels": "{" + ",".join(f'{k}="{v}"' for k, v in
                                                      sorted(labels.items())) + "}",
                             "value": 1}]}


def falling_case(pair: ResolvedPair, scale: float = 1.0) -> tuple[dict[str, Any], list[float]]:
    """The promtool case and the replicas (ceil) it expects at τ = SLO, τ*, 1."""
    name = pair.name
    be = breakeven(name)
    here = be["at_concurrency"]
    b = here["concurrency"]
    auto = pair.runbook.deployment.autoscaling
    assert auto is not None
    taus = [be["slo"], here["break_even"], 1.0]
    alone = b / here["t_decode_s"]
    expected = {  # tokens/s of one replica at each τ, by bound
        "model": [b * 1e3 / here["tpot_ms_at_slo"], alone],
        "lower": [b * 1e3 / here["tpot_ms_at_slo_range"][1]],
        "upper": [b * 1e3 / here["tpot_ms_at_slo_range"][0]]}
    # two replicas at the same acceptance, each serving 0.45 of one lower-bound replica
    per_replica = 0.45 * auto.target_utilization * expected["lower"][0]
    m = for_engine(pair.engine)
    inputs = [*dropping(m, name, "a", taus, per_replica * 60),
              *dropping(m, name, "b", taus, per_replica * 60)]
    times = [f"{SEGMENT * (i + 1) - 5}m" for i in range(3)]
    where = {PAIR_LABEL: name, "instance": "a"}
    step_model = "unverified" if be["uncertainty"]["few_points"] else "fitted"
    tests = []
    for bound, values in expected.items():
        for value, at in zip(values, times, strict=False):
            tests.append(close(f'{CAPACITY}{{instance="a",bound="{bound}"}}', value * scale,
                               {**where, "bound": bound, "step_model": step_model}, at))
    demand = 2 * per_replica
    lower_at_slo = expected["lower"][0]
    tests.append(close(f'{REPLICAS}{{bound="lower"}}',
                       demand / (auto.target_utilization * lower_at_slo) * scale,
                       {PAIR_LABEL: name, "bound": "lower"}, times[0]))
    # capacity falls and the replicas rise, step by step, as Prometheus evaluates them
    for later in times[1:]:
        for bound in ("model", "lower", "upper"):
            tests.append({"expr": f'{CAPACITY}{{instance="a",bound="{bound}"}} < bool '
                                  f'{CAPACITY}{{instance="a",bound="{bound}"}} offset 40m',
                          "eval_time": later, "exp_samples": [{"labels": "{" + ",".join(
                              f'{k}="{v}"' for k, v in sorted(
                                  {**where, "bound": bound, "step_model": step_model}.items()))
                              + "}", "value": 1}]})
        tests.append({"expr": f'{REPLICAS}{{bound="lower"}} > bool '
                              f'{REPLICAS}{{bound="lower"}} offset 40m',
                      "eval_time": later, "exp_samples": [
                          {"labels": "{" + f'bound="lower",{PAIR_LABEL}="{name}"' + "}",
                           "value": 1}]})
    # at τ = 1 the pair needs more than the one replica it ran on at the SLO
    tests.append({"expr": f'{REPLICAS}{{bound="lower"}} > bool 1', "eval_time": times[2],
                  "exp_samples": [{"labels": "{" + f'bound="lower",{PAIR_LABEL}="{name}"' + "}",
                                   "value": 1}]})
    replicas = [demand / (auto.target_utilization * lower_at_slo)]
    return {"interval": "1m", "input_series": inputs, "promql_expr_test": tests}, replicas


def idle_case(pair: ResolvedPair, scale: float = 1.0) -> dict[str, Any]:
    """A replica that generates without drafting counts at the target alone's capacity."""
    name = pair.name
    be = breakeven(name)
    here = be["at_concurrency"]
    alone = here["concurrency"] / here["t_decode_s"]
    throughput_lo, throughput_hi = be["uncertainty"]["throughput_ratio"]
    step_model = "unverified" if be["uncertainty"]["few_points"] else "fitted"
    m = for_engine(pair.engine)
    inputs = [series(m.generated_tokens, "c", "0+600x120", name),
              series(m.verify_steps, "c", "1000+0x120", name)]
    tests = [close(f'{CAPACITY}{{bound="{bound}"}}', value * scale,
                   {PAIR_LABEL: name, "instance": "c", "bound": bound,
                    "step_model": step_model}, "100m")
             for bound, value in (("model", alone), ("lower", alone / throughput_hi),
                                  ("upper", alone / throughput_lo))]
    return {"interval": "1m", "input_series": inputs, "promql_expr_test": tests}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_capacity_falls_with_acceptance_and_replicas_rise(name: str, tmp_path: Path) -> None:
    pair = PAIRS[name]
    rules = tmp_path / "rules.yaml"
    rules.write_text(generated(name, "prometheus-rules.yaml"))
    check_rules(rules)
    case, replicas = falling_case(pair)
    assert math.ceil(replicas[0]) == 1  # the premise: one replica suffices at the SLO
    result = run_unit_tests(rules, [case, idle_case(pair)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_capacity_off_by_two_percent_fails_promtool(tmp_path: Path) -> None:
    name = "llama31-8b-eagle3"
    rules = tmp_path / "rules.yaml"
    rules.write_text(generated(name, "prometheus-rules.yaml"))
    case, _ = falling_case(PAIRS[name], scale=1.02)
    result = run_unit_tests(rules, [case, idle_case(PAIRS[name], scale=1.02)], tmp_path)
    assert result.returncode != 0 and CAPACITY in result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_scaled_object_is_valid_and_scales_the_pairs_workload(name: str) -> None:
    pair = PAIRS[name]
    auto = pair.runbook.deployment.autoscaling
    assert auto is not None
    (doc,) = documents(generated(name, "autoscaling.k8s.yaml"))
    validate(doc)  # KEDA v2.20.2's CRD schema, strict
    assert api_name_problems(doc) == []
    target = workload(generated(name, "deployment.k8s.yaml"))
    ref = doc["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        target["apiVersion"], target["kind"], target["metadata"]["name"])
    spec = doc["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (auto.min_replicas,
                                                                   auto.max_replicas)
    (trigger,) = spec["triggers"]
    # KEDA's fallback needs an AverageValue trigger (CheckFallbackValid); an empty answer
    # must be an error, so that missing series never scale the pair down
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["threshold"] == "1"
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    assert trigger["metadata"]["serverAddress"] == pair.runbook.kubernetes.prometheus_url
    query = trigger["metadata"]["query"]
    assert query == (f'max({REPLICAS}{{{PAIR_LABEL}="{name}", '
                     f'bound="{auto.capacity_bound}"}})')
    recorded = {(r["record"], r.get("labels", {}).get("bound"))
                for g in rule_groups(generated(name, "monitoring.k8s.yaml")) for r in g["rules"]
                if "record" in r}
    assert (REPLICAS, auto.capacity_bound) in recorded
    assert {(CAPACITY, b) for b in ("model", "lower", "upper")} <= recorded


def test_a_field_the_crd_does_not_name_is_refused() -> None:
    (doc,) = documents(generated("llama31-8b-eagle3", "autoscaling.k8s.yaml"))
    doc["spec"]["maxReplicas"] = 3  # the HPA's spelling, not KEDA's
    with pytest.raises(Exception, match="maxReplicas"):
        validate(doc)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_an_unverified_step_model_is_said_so(name: str) -> None:
    few = breakeven(name)["uncertainty"]["few_points"]
    rules = generated(name, "prometheus-rules.yaml")
    labels = {r.get("labels", {}).get("step_model") for g in yaml.safe_load(rules)["groups"]
              for r in g["rules"] if r.get("record") == CAPACITY}
    assert labels == {"unverified" if few else "fitted"}
    assert ("# Unverified step model:" in rules) == few
    assert ("# Unverified step model:" in generated(name, "autoscaling.k8s.yaml")) == few


def test_a_deployment_the_step_model_refuses_gets_no_capacity_and_says_why() -> None:
    a = Analysis(vllm_two_nodes())
    assert a.not_modelled is not None
    rules = monitoring_files.generate(a)[monitoring_files.RULES].decode()
    records = {r.get("record") for g in rule_groups(rules) for r in g["rules"]}
    assert CAPACITY not in records and REPLICAS not in records
    assert "# Omitted, the capacity records and the autoscaler" in rules
    assert a.not_modelled in rules
    scaler = autoscaler_files.generate(a)[autoscaler_files.AUTOSCALER].decode()
    assert documents(scaler) == [] and a.not_modelled in scaler


def test_max_replicas_below_min_is_refused() -> None:
    with pytest.raises(ValidationError, match="max_replicas 2 is below min_replicas 3"):
        Autoscaling(min_replicas=3, max_replicas=2)
    assert Autoscaling(min_replicas=2, max_replicas=2).max_replicas == 2
