"""Synthetic engine series and promtool unit-test cases for the generated alert rules."""

from __future__ import annotations

from typing import Any

from specpair.analyse.alerts import PAIR_LABEL
from specpair.analyse.monitoring import EngineMetrics

MINUTES = 120


EVAL = "100m"


def series(name: str, instance: str, values: str, pair: str, **labels: str) -> dict[str, str]:
    extra = "".join(f',{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f'{name}{{{PAIR_LABEL}="{pair}",instance="{instance}"{extra}}}',
            "values": values}


def ramp(per_minute: float, minutes: int = MINUTES, start: float = 0) -> str:
    return f"{float(start)!r}+{float(per_minute)!r}x{minutes}"


def engine_counters(m: EngineMetrics, pair: str, instance: str, tau: float | None,
                    tokens_per_minute: float = 600,
                    minutes: int = MINUTES) -> list[dict[str, str]]:
    """Counters of a server emitting `tokens_per_minute` at acceptance length `tau`
    (None: speculating no more, the verify counters stand still)."""
    out = [series(m.generated_tokens, instance, ramp(tokens_per_minute, minutes), pair)]
    steps = tokens_per_minute / tau if tau else 0.0
    start = 0 if tau else 1000
    out.append(series(m.verify_steps, instance, ramp(steps, minutes, start=start), pair))
    if m.accepted is not None:
        # vLLM: τ = 1 + accepted / drafts, so accepted = steps · (τ − 1)
        out.append(series(m.accepted, instance, ramp(steps * (tau - 1) if tau else 0,
                                                     minutes, start=start), pair))
    return out


def gauges(m: EngineMetrics, pair: str, instance: str, running: float,
           minutes: int = MINUTES) -> list[dict[str, str]]:
    return [series(m.running_requests, instance, f"{running:g}+0x{minutes}", pair),
            series(m.kv_usage_fraction, instance, f"0.5+0x{minutes}", pair),
            series("up", instance, f"1+0x{minutes}", pair, job="engine")]


def alert_rules(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


def expect(rules: dict[str, dict[str, Any]], alert: str, firing: list[dict[str, str]],
           at: str = EVAL) -> dict[str, Any]:
    rule = rules[alert]
    return {"eval_time": at, "alertname": alert, "exp_alerts": [
        {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": rule["annotations"]}
        for labels in firing]}


def where(pair: str, instance: str, **labels: str) -> dict[str, str]:
    return {PAIR_LABEL: pair, "instance": instance, **labels}
