"""The acceptance SLO in production: Prometheus recording and alerting rules of a pair.

Thresholds come from the runbook (SLO, cold-start budget), the budget (pool bytes) and the
break-even model (τ* by concurrency), so a runbook change changes the rules. Every series
is selected by the `specpair_pair` label that the generated PodMonitor sets (a plain
Prometheus scrape config must set it too) and aggregated per scrape target (`instance`).

Rules, for each engine as it defines the acceptance length τ (bonus token included):
- `specpair:acceptance_length:rate<w>`: τ over several windows, from the engine's counters;
- SLO alert: the runbook's percentile of the 5-minute τ over the last hour below the
  SLO's minimum. Neither engine exports per-request acceptance as a metric, so a
  per-request SLO is watched through these 5-minute windows and the output says so;
- break-even alert: τ over 30 minutes below τ* at the running concurrency (τ* of the
  break-even curve, the larger of the two curve points around the measured concurrency);
- fallback alerts: tokens generated while the verify counter stands still, or while the
  speculative series is missing;
- KV bytes in use per pool (the engine's usage share times each budgeted pool) and the
  engine's own pool, weights and start-up numbers where it exports them; an alert when
  the target does not answer within the cold-start budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from specpair.analyse.latency import LatencyModel, Point
from specpair.analyse.monitoring import EngineMetrics, for_engine
from specpair.analyse.schedule import break_even_by_concurrency, slo_by_depth
from specpair.analyse.staging import StagingPlan
from specpair.model.alerting import AlertWindows, seconds
from specpair.model.budget import Budget
from specpair.resolve.pair import ResolvedPair

PAIR_LABEL = "specpair_pair"
BY = f"{PAIR_LABEL}, instance"
WINDOWS = ("5m", "30m", "1h", "6h")  # recorded τ windows (the dashboard's), plus the alerts'
FALLBACK_WINDOW = "10m"
GIB = 2 ** 30


@dataclass(frozen=True)
class Thresholds:
    slo_min: float
    scope: str
    percentile: int
    basis: str
    break_even: float | None
    """None where the deployment is not modelled (`not_modelled`)."""
    concurrency: int
    curve: list[tuple[int, float]]
    points: list[Point]
    cold_start_budget_s: float
    cold_start_plan_s: float
    target_weight_bytes: int
    draft_weight_bytes: int
    target_kv_bytes: int
    draft_kv_bytes: int
    max_total_tokens: int
    depth_slo: tuple[tuple[int, float], ...] = ()
    """Under a speculation schedule: (K, the SLO carried to K), K = 0 first; empty: static."""
    depth_window: str = ""
    """The window of the depth-aware records (the SLO alert's), where depth_slo is set."""
    capacity_estimate: str | None = None
    """The interval of max_total_tokens where the engine measures it at start-up (vLLM
    0.34.0, kv_cache_sizing: measured): the figure is then an estimate, labelled so."""
    not_modelled: str | None = None
    """"not modelled: …" where the latency model refuses the deployment: no break-even
    curve, no modelled speedup (`step_inputs.not_modelled_text`)."""


def thresholds(pair: ResolvedPair, budget: Budget, latency: LatencyModel | None,
               staging: StagingPlan, not_modelled: str | None = None) -> Thresholds:
    """From the pair's analysis (`Analysis.thresholds`): the rules, the dashboard and the
    site read the same numbers. Without a latency model (`not_modelled` says why) the
    break-even and speedup parts are empty and what reads them states the refusal."""
    rb = pair.runbook
    scenario = budget.speculative or budget.baseline
    weights = {w.key: w.value for w in budget.weights}
    slo = rb.acceptance.slo
    return Thresholds(
        slo_min=slo.min_length, scope=slo.scope, percentile=slo.percentile, basis=slo.basis,
        break_even=None if latency is None else latency.at_concurrency.break_even,
        concurrency=(rb.deployment.concurrency or rb.deployment.max_running_requests or 0)
        if latency is None else latency.concurrency,
        curve=[] if latency is None else break_even_by_concurrency(
            pair, [(p.concurrency, p.break_even) for p in latency.curve]),
        points=[] if latency is None else latency.curve, depth_slo=tuple(slo_by_depth(pair)),
        not_modelled=not_modelled,
        depth_window=rb.alerts.slo_window,
        cold_start_budget_s=rb.staging.cold_start_budget_s,
        cold_start_plan_s=staging.cold_start_s,
        target_weight_bytes=int(weights.get("target_weights", 0)),
        draft_weight_bytes=int(weights.get("draft_weights", 0)),
        target_kv_bytes=scenario.target_kv_bytes, draft_kv_bytes=scenario.draft_kv_bytes,
        max_total_tokens=scenario.max_total_tokens,
        capacity_estimate=scenario.capacity_estimate)


def selector(pair: str, extra: str = "") -> str:
    return "{" + f'{PAIR_LABEL}="{pair}"' + (f", {extra}" if extra else "") + "}"


def acceptance_expr(metrics: EngineMetrics, pair: str, window: str) -> str:
    """τ over `window` per scrape target; no sample where nothing was verified."""
    s = selector(pair)
    steps = f"(sum by ({BY}) (rate({metrics.verify_steps}{s}[{window}])) > 0)"
    if metrics.accepted is not None:
        return f"1 + sum by ({BY}) (rate({metrics.accepted}{s}[{window}])) / {steps}"
    return f"sum by ({BY}) (rate({metrics.generated_tokens}{s}[{window}])) / {steps}"


def break_even_expr(pair: str, curve: list[tuple[int, float]]) -> str:
    """τ* at the measured running concurrency, as a step function of the break-even curve:
    between two curve points the larger τ* (the stricter threshold)."""
    running = f"specpair:running_requests:avg5m{selector(pair)}"
    parts = [f"({running} <= {curve[0][0]}) * 0 + {curve[0][1]:g}"]
    for (low, tau_low), (high, tau_high) in pairwise(curve):
        parts.append(f"(({running} > {low}) <= {high}) * 0 + {max(tau_low, tau_high):g}")
    parts.append(f"({running} > {curve[-1][0]}) * 0 + {curve[-1][1]:g}")
    return "\nor\n".join(parts)


def depth_expr(metrics: EngineMetrics, pair: str, window: str) -> str | None:
    """The draft length the engine runs, over `window`: vLLM's drafted tokens per draft
    (the mean K of its steps), SGLang's current-steps gauge averaged; None where the
    release exports neither."""
    if metrics.draft_depth is None:
        return None
    kind, metric = metrics.draft_depth
    s = selector(pair)
    if kind == "gauge":
        return f"avg by ({BY}) (avg_over_time({metric}{s}[{window}]))"
    steps = f"(sum by ({BY}) (rate({metrics.verify_steps}{s}[{window}])) > 0)"
    return f"sum by ({BY}) (rate({metric}{s}[{window}])) / {steps}"


def slo_at_depth_expr(pair: str, window: str, points: tuple[tuple[int, float], ...],
                      slo_min: float) -> str:
    """The SLO at the depth in use: the chords of τ_SLO(K) between the schedule's depths at
    the recorded mean depth D (a window that mixes two depths expects the chord, not the
    curve); past the deepest, its SLO. Without a depth series: the runbook's SLO."""
    depth = f"specpair:draft_depth:rate{window}{selector(pair)}"
    parts = []
    for (k_a, t_a), (k_b, t_b) in pairwise(points):
        slope = (t_b - t_a) / (k_b - k_a)
        parts.append(f"({t_a:g} + ({depth} - {k_a}) * {slope:.6g}) and on({BY}) "
                     f"(({depth} > {k_a}) <= {k_b})" if k_a else
                     f"({t_a:g} + {depth} * {slope:.6g}) and on({BY}) ({depth} <= {k_b})")
    parts.append(f"({depth} * 0 + {points[-1][1]:g}) and on({BY}) "
                 f"({depth} > {points[-1][0]})")
    tau = f"specpair:acceptance_length:rate{window}{selector(pair)}"
    parts.append(f"({tau} * 0 + {slo_min:g}) unless on({BY}) {depth}")
    return "\nor\n".join(parts)


FIRST_REQUEST_LOOKBACK_S = 6 * 3600
FIRST_REQUEST_STEP_S = 60


SPEEDUP_WINDOW = "30m"


def speedup_expr(pair: str, points: list[Point]) -> str:
    """The verdict's expected speedup S(τ, B) = τ·T_decode / (T_draft + T_verify +
    τ·T_per_token) (`StepTimes.speedup`), at the 30-minute τ and the running concurrency,
    with each curve point's step times; between two points the higher concurrency's (the
    speedup falls with load), so at a curve point it is that point's."""
    tau = f"specpair:acceptance_length:rate{SPEEDUP_WINDOW}{selector(pair)}"
    running = f"specpair:running_requests:avg5m{selector(pair)}"

    def at(p: Point) -> str:
        return (f"({tau} * {p.t_decode_s!r} / ({p.t_draft_s + p.t_verify_s!r} + {tau} * "
                f"{p.t_per_token_s!r}))")

    parts = [f"{at(points[0])} and on({BY}) ({running} <= {points[0].concurrency})"]
    for low, high in pairwise(points):
        parts.append(f"{at(high)} and on({BY}) "
                     f"(({running} > {low.concurrency}) <= {high.concurrency})")
    parts.append(f"{at(points[-1])} and on({BY}) ({running} > {points[-1].concurrency})")
    return "\nor\n".join(parts)


def _first_request_parts(metrics: EngineMetrics, pair: str) -> tuple[str, str, str]:
    """(process start, subquery of the times this process was seen with a finished
    request, subquery of the times it was seen with none).

    Times are the scrape's own sample times (`timestamp` of the selector, not of an
    expression, which would be the evaluation time): after a restart the earlier process's
    last sample stays visible for the lookback delta, and its time is before the new
    start, so `>= start @ end()` drops it. `@ end()` pins the start to the current
    process, so requests served by an earlier process do not count."""
    s = selector(pair)
    start = f"max by ({BY}) ({metrics.process_start}{s})"
    current = f"max by ({BY}) ({metrics.process_start}{s} @ end())"
    sampled = f"max by ({BY}) (timestamp({metrics.requests_done}{s}))"
    count = f"sum by ({BY}) ({metrics.requests_done}{s})"
    window = f"[{FIRST_REQUEST_LOOKBACK_S // 3600}h:{FIRST_REQUEST_STEP_S // 60}m]"

    def seen(condition: str) -> str:
        return f"(({sampled} and on({BY}) ({count} {condition})) >= on({BY}) {current}){window}"

    return start, seen("> 0"), seen("== 0")


def first_request_expr(metrics: EngineMetrics, pair: str) -> str:
    """Seconds from the serving process's start to the first scrape that saw a finished
    request, sampled per minute over 6 hours.

    Only where this Prometheus saw the finished-request counter at 0 in the current
    process: a scrape that begins after the first request (a Prometheus restart, a
    PodMonitor applied late) has no first request to see, and its first sample would
    stand in for it. vLLM exports the counter at 0 from start-up (`PrometheusStatLogger`
    creates every `finished_reason` child with `.labels()`, vllm/v1/metrics/loggers.py
    807-819 in 0.32.0 and 0.33.0), so a scrape that was there from the start sees the 0.
    Only while the start is inside the window: past it the window's oldest sample would
    stand in for the first request and the value would grow with uptime, so the series
    ends there instead."""
    start, served, idle = _first_request_parts(metrics, pair)
    inside = FIRST_REQUEST_LOOKBACK_S - FIRST_REQUEST_STEP_S
    return (f"(min_over_time({served})\n"
            f"- on({BY}) {start})\n"
            f"and on({BY}) max_over_time({idle})\n"
            f"and on({BY}) (time() - {start} < {inside})")


def first_request_late_expr(metrics: EngineMetrics, pair: str, budget_s: float) -> str:
    """The first request came after the budget: the recorded time is over it, and so is
    the last scrape that still saw no finished request. The recorded time is an upper
    bound (the first sample with one); with a gap in the scrapes around the first request
    it can be far above the request, so the alert also needs the lower bound over the
    budget: a server proven still without a finished request at the budget."""
    start, _, idle = _first_request_parts(metrics, pair)
    return (f"specpair:time_to_first_request_seconds{selector(pair)} > {budget_s:g}\n"
            f"and on({BY}) (max_over_time({idle})\n"
            f"- on({BY}) {start} > {budget_s:g})")


def watches_first_request(pair: ResolvedPair, metrics: EngineMetrics) -> bool:
    """Not where data parallelism > 1 leaves the release without process metrics (vLLM's
    API servers on prometheus_client's multiprocess registry: no process collector)."""
    dp = pair.runbook.deployment.parallel.data
    multiprocess = dp > 1 and not metrics.process_metrics_with_data_parallel
    return bool(metrics.process_start and metrics.requests_done) and not multiprocess


def recorded_windows(windows: AlertWindows) -> list[str]:
    return sorted({*WINDOWS, windows.slo_window, windows.break_even_window}, key=seconds)


def _minutes(value: float) -> str:
    return f"{value / 60:.0f} min" if value < 5400 else f"{value / 3600:.1f} h"


@dataclass(frozen=True)
class Delay:
    alert: str
    pages_within_s: int
    """A sustained drop below the threshold pages within this (plus an evaluation)."""
    clears_within_s: int
    """After recovery the alert resolves within this (plus an evaluation)."""


def delays(pair: ResolvedPair) -> list[Delay]:
    """What the alert windows mean for an operator, from how PromQL evaluates the rules: a
    windowed rate moves fully within its window; a percentile over the lookback turns once
    its share of the lookback's windows is low; `for` adds its own wait."""
    w = pair.runbook.alerts
    p = pair.runbook.acceptance.slo.percentile / 100
    be = seconds(w.break_even_window)
    slo, look = seconds(w.slo_window), seconds(w.slo_lookback)
    return [Delay("SpecpairBelowBreakEven", be + seconds(w.break_even_for), be),
            Delay("SpecpairAcceptanceBelowSLO", round(slo + p * look + seconds(w.slo_for)),
                  round(slo + (1 - p) * look))]


def detection(pair: ResolvedPair) -> list[str]:
    """The delays in words, with the windows they come from."""
    w = pair.runbook.alerts
    be, slo = delays(pair)
    pct = pair.runbook.acceptance.slo.percentile
    return [
        f"SpecpairBelowBreakEven: a sustained drop below τ* pages within "
        f"{_minutes(be.pages_within_s)} ({w.break_even_window} window + {w.break_even_for} "
        f"for; sooner when the drop is deep); a dip pages only if the {w.break_even_window} "
        f"τ stays below τ* for {w.break_even_for}; it clears within "
        f"{_minutes(be.clears_within_s)} of recovery",
        f"SpecpairAcceptanceBelowSLO: a sustained drop below the SLO pages within "
        f"{_minutes(slo.pages_within_s)} ({w.slo_window} window + p{pct} of "
        f"{w.slo_lookback} + {w.slo_for} for); it keeps firing up to "
        f"{_minutes(slo.clears_within_s)} after recovery"]


def _seconds(value: float) -> str:
    return f"{max(1, round(value))}s"


def groups(pair: ResolvedPair, t: Thresholds) -> list[dict[str, Any]]:
    """The pair's rule groups, as Prometheus's rule-file `groups:` list."""
    metrics = for_engine(pair.engine, pair.source_file)
    name = pair.name
    records = _records(pair, t, metrics)
    depth_aware = bool(t.depth_slo) and metrics.draft_depth is not None
    if depth_aware:  # under a schedule τ is judged against the SLO at the depth in use
        records += _depth_records(metrics, name, pair.runbook.alerts.slo_window, t)
    alerts = [_slo_alert(name, t, metrics, pair.runbook.alerts, depth_aware),
              *_fallback_alerts(name, t, metrics)]
    if t.not_modelled is None:  # the break-even alert needs the modelled τ*
        alerts.insert(1, _break_even_alert(name, t, pair.runbook.alerts))
    alerts += _start_up_alerts(pair, t, metrics)
    return [{"name": f"specpair-{name}-records", "rules": records},
            {"name": f"specpair-{name}-alerts", "rules": alerts}]


def _records(pair: ResolvedPair, t: Thresholds,
             metrics: EngineMetrics) -> list[dict[str, Any]]:
    """The recording rules of every pair: τ by window, running requests, the modelled
    break-even and speedup, KV bytes by pool, and what the engine exports about itself."""
    name = pair.name
    s = selector(name)
    records: list[dict[str, Any]] = [
        {"record": f"specpair:acceptance_length:rate{w}", "expr": acceptance_expr(metrics, name, w)}
        for w in recorded_windows(pair.runbook.alerts)]
    records.append({"record": "specpair:running_requests:avg5m",
                    "expr": f"sum by ({BY}) (avg_over_time({metrics.running_requests}{s}[5m]))"})
    if t.not_modelled is None:  # else no break-even curve or speedup to record
        records += [{"record": "specpair:break_even_tau", "expr": break_even_expr(name, t.curve)},
                    {"record": "specpair:modelled_speedup",
                     "expr": speedup_expr(name, t.points)}]
    for pool, size in (("target", t.target_kv_bytes), ("draft", t.draft_kv_bytes)):
        records.append({"record": "specpair:kv_used_bytes",
                        "expr": f"avg by ({BY}) ({metrics.kv_usage_fraction}{s}) * {size}",
                        "labels": {"pool": pool}})
    if metrics.kv_capacity_tokens:
        records.append({"record": "specpair:engine_kv_capacity_tokens",
                        "expr": f"max by ({BY}) ({metrics.kv_capacity_tokens}{s})"})
    if metrics.target_kv_gib:
        records.append({"record": "specpair:engine_kv_bytes",
                        "expr": f"max by ({BY}) ({metrics.target_kv_gib}{s}) * {GIB}",
                        "labels": {"pool": "target"}})
    if metrics.target_weights_gib:
        records.append({"record": "specpair:engine_weight_bytes",
                        "expr": f"max by ({BY}) ({metrics.target_weights_gib}{s}) * {GIB}",
                        "labels": {"model": "target"}})
    if metrics.startup_seconds:
        metric, extra = metrics.startup_seconds
        records.append({"record": "specpair:engine_startup_seconds",
                        "expr": f"max by ({BY}) ({metric}{selector(name, extra)})"})
    if watches_first_request(pair, metrics):
        records.append({"record": "specpair:time_to_first_request_seconds",
                        "expr": first_request_expr(metrics, name)})
    return records


def _depth_records(metrics: EngineMetrics, name: str, window: str,
                   t: Thresholds) -> list[dict[str, Any]]:
    """The draft length in use, the SLO at that length, and τ over it: what the SLO alert
    reads under a speculation schedule (the engine must export a depth series)."""
    depth = depth_expr(metrics, name, window)
    assert depth is not None
    s = selector(name)
    return [
        {"record": f"specpair:draft_depth:rate{window}", "expr": depth},
        {"record": f"specpair:slo_at_depth:rate{window}",
         "expr": slo_at_depth_expr(name, window, t.depth_slo, t.slo_min)},
        {"record": f"specpair:acceptance_over_slo:rate{window}",
         "expr": f"specpair:acceptance_length:rate{window}{s} / on({BY}) "
                 f"specpair:slo_at_depth:rate{window}{s}"}]


def _slo_alert(name: str, t: Thresholds, metrics: EngineMetrics, windows: AlertWindows,
               depth_aware: bool) -> dict[str, Any]:
    s = selector(name)
    q = t.percentile / 100
    scope_note = ("per 5-minute window" if t.scope == "per_batch" else
                  "per 5-minute window, standing in for the per-request SLO: "
                  + metrics.per_request)
    return _alert(
        "SpecpairAcceptanceBelowSLO",
        f"quantile_over_time({q:g}, specpair:acceptance_over_slo:rate"
        f"{windows.slo_window}{s}[{windows.slo_lookback}]) < 1" if depth_aware else
        f"quantile_over_time({q:g}, specpair:acceptance_length:rate{windows.slo_window}"
        f"{s}[{windows.slo_lookback}]) < {t.slo_min:g}", windows.slo_for, "warning",
        f"{name}: acceptance below the SLO",
        f"p{t.percentile} of the {windows.slo_window} acceptance length over "
        f"{windows.slo_lookback} "
        f"is below the SLO's minimum τ {t.slo_min:g} ({t.scope}, basis {t.basis}); "
        + ("under the speculation schedule, the SLO carried to the draft length in "
           "use (" + ", ".join(f"K {k}: {v:g}" for k, v in t.depth_slo[1:])
           + f"; {metrics.draft_depth[1] if metrics.draft_depth else ''} says which); "
           if depth_aware else "")
        + f"measured {scope_note}.")


def _fallback_alerts(name: str, t: Thresholds,
                     metrics: EngineMetrics) -> list[dict[str, Any]]:
    """Serving without speculation (its counter still, or its series missing), and no
    answer within the cold-start budget."""
    s = selector(name)
    tokens = f"sum by ({BY}) (rate({metrics.generated_tokens}{s}[{FALLBACK_WINDOW}])) > 0"
    return [
        _alert("SpecpairSpeculationStopped",
               f"({tokens}) and on({BY}) (sum by ({BY}) "
               f"(rate({metrics.verify_steps}{s}[{FALLBACK_WINDOW}])) == 0)",
               FALLBACK_WINDOW, "critical",
               f"{name}: tokens generated without speculation",
               f"{metrics.generated_tokens} grows while {metrics.verify_steps} stands still: "
               "the server no longer drafts (a fallback)."),
        _alert("SpecpairSpeculativeSeriesMissing",
               f"({tokens}) unless on({BY}) (count by ({BY}) ({metrics.verify_steps}{s}))",
               FALLBACK_WINDOW, "critical",
               f"{name}: no speculative-decoding series",
               f"Tokens are generated but {metrics.verify_steps} does not exist: the server "
               "runs without its draft; check its launch command and log."),
        _alert("SpecpairNotReadyWithinColdStartBudget",
               f"up{s} == 0", _seconds(t.cold_start_budget_s), "warning",
               f"{name}: not serving within the cold-start budget",
               f"The engine's /metrics has not answered for the cold-start budget of "
               f"{t.cold_start_budget_s:g} s (planned cold start {t.cold_start_plan_s:g} s)."),
    ]


def _break_even_alert(name: str, t: Thresholds, windows: AlertWindows) -> dict[str, Any]:
    s = selector(name)
    return _alert(
        "SpecpairBelowBreakEven",
        f"specpair:acceptance_length:rate{windows.break_even_window}{s} < on({BY}) "
        f"specpair:break_even_tau{s}", windows.break_even_for, "critical",
        f"{name}: speculation slower than the target alone",
        f"The {windows.break_even_window} acceptance length is below break-even τ* at the "
        f"running concurrency (τ* {t.break_even:.2f} at the runbook's concurrency "
        f"{t.concurrency}): the draft costs more than it saves; turn speculation off "
        "or retrain the draft.")


def _start_up_alerts(pair: ResolvedPair, t: Thresholds,
                     metrics: EngineMetrics) -> list[dict[str, Any]]:
    """Start-up over the cold-start budget, where the release exports what shows it."""
    name = pair.name
    alerts: list[dict[str, Any]] = []
    if metrics.startup_seconds:
        alerts.append(_alert(
            "SpecpairEngineStartupOverBudget",
            f"specpair:engine_startup_seconds{selector(name)} > {t.cold_start_budget_s:g}",
            "0s", "warning",
            f"{name}: engine start-up longer than the cold-start budget",
            f"The engine's own start-up took longer than the whole cold-start budget of "
            f"{t.cold_start_budget_s:g} s (planned cold start {t.cold_start_plan_s:g} s)."))
    if watches_first_request(pair, metrics):
        alerts.append(_alert(
            "SpecpairFirstRequestOverColdStartBudget",
            first_request_late_expr(metrics, name, t.cold_start_budget_s), "0s",
            "warning", f"{name}: first request after a start later than the cold-start budget",
            f"The first request finished more than {t.cold_start_budget_s:g} s (the cold-start "
            f"budget; planned {t.cold_start_plan_s:g} s) after the serving process started; "
            "staging before the process starts is not included. Watched for the first "
            f"{FIRST_REQUEST_LOOKBACK_S // 3600} h of each process, where Prometheus saw it "
            "with no finished request yet."))
    return alerts


def _alert(name: str, expr: str, for_: str, severity: str, summary: str,
           description: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ != "0s":
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule
