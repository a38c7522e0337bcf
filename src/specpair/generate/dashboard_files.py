"""`dashboard.grafana.json`: the pair's Grafana dashboard, built with Grafana's own
foundation SDK (typed builders, so the JSON follows the dashboard schema of Grafana 11.6).

Three rows, all from the recorded series of `prometheus-rules.yaml` and the budget:
- latency: measured acceptance length against the SLO and break-even τ*, and the
  modelled speedup (the verdict's, at the measured τ and running concurrency); for a
  deployment the latency model refuses, a text panel with the refusal in their place;
- memory, per GPU rank: weights and both KV pools as budgeted, beside the KV bytes in use
  and what the engine itself reports where it does (SGLang);
- staging: the cold-start budget and plan beside the engine's start-up and `up`, and what
  serves after the canary before traffic (its verdict and reasons).
Variables: the Prometheus data source, and the deployment's namespace and scrape targets.
The JSON is written with sorted keys and fixed ids, so it is byte-identical run to run.
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, text, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.text import TextMode

from specpair.analyse.alerts import Thresholds, selector, watches_first_request
from specpair.analyse.analysis import Analysis
from specpair.analyse.monitoring import EngineMetrics, for_engine
from specpair.engines.verified_layouts import marks

DASHBOARD = "dashboard.grafana.json"
PanelBuilder = cogbuilder.Builder[model.Panel]
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
TARGETS = 'instance=~"$instance"'


def _query(ref: str, expr: str, legend: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().ref_id(ref).expr(expr).legend_format(legend) \
        .datasource(DATASOURCE)


def _series(name: str, pair: str, extra: str = "") -> str:
    return f"{name}{selector(pair, TARGETS + (', ' + extra if extra else ''))}"


def _timeseries(panel_id: int, title: str, description: str, unit: str,
                queries: list[prometheus.Dataquery], width: int = 12) -> timeseries.Panel:
    panel = timeseries.Panel().id(panel_id).title(title).description(description) \
        .unit(unit).datasource(DATASOURCE).height(8).span(width)
    for query in queries:
        panel = panel.with_target(query)
    return panel


def latency_panels(pair: str, t: Thresholds, m: EngineMetrics) -> list[PanelBuilder]:
    acceptance = [_query(chr(ord("A") + i), _series(f"specpair:acceptance_length:rate{w}",
                                                    pair), f"τ {w} {{{{instance}}}}")
                  for i, w in enumerate(("5m", "30m", "1h"))]
    acceptance.append(_query("D", f"vector({t.slo_min:g})",
                             f"SLO min τ {t.slo_min:g} ({t.scope}, p{t.percentile})"))
    if t.not_modelled is None:  # else no τ* to plot (the speedup panel says why)
        acceptance += [
            _query("E", _series("specpair:break_even_tau", pair),
                   "τ* at running concurrency {{instance}}"),
            _query("F", f"vector({t.break_even:g})",
                   f"τ* {t.break_even:.2f} at concurrency {t.concurrency}")]
    if t.depth_slo and m.draft_depth is not None:  # what the depth-aware SLO alert reads
        acceptance.append(_query("G", _series(f"specpair:slo_at_depth:rate{t.depth_window}",
                                              pair),
                                 "SLO at the draft length in use {{instance}}"))
    speedup = _query("A", _series("specpair:modelled_speedup", pair),
                     "modelled speedup {{instance}}")
    activity = [
        _query("A", f"sum by (instance) (rate({_series(m.generated_tokens, pair)}[5m]))",
               "generated tokens/s {{instance}}"),
        _query("B", f"sum by (instance) (rate({_series(m.verify_steps, pair)}[5m]))",
               "verify steps/s {{instance}}"),
        _query("C", _series("specpair:running_requests:avg5m", pair),
               "running requests {{instance}}")]
    if t.depth_slo and m.draft_depth is not None:
        activity.append(_query("D", _series(f"specpair:draft_depth:rate{t.depth_window}",
                                            pair), "draft length in use {{instance}}"))
    modelled: PanelBuilder = _timeseries(
        2, "Speedup over the target alone (modelled)",
        "The verdict's expected speedup τ·T_decode / (T_draft + T_verify + "
        "τ·T_per_token) at the 30-minute τ and the running concurrency "
        "(specpair:modelled_speedup); below 1 speculation costs time.", "none",
        [speedup], width=6)
    if t.not_modelled is not None:
        modelled = text.Panel().id(2).title("Speedup and break-even τ*: not modelled") \
            .height(8).span(6).mode(TextMode.MARKDOWN).content(
                f"The latency model refuses this deployment, so no modelled speedup or "
                f"break-even τ* is plotted or alerted on — {t.not_modelled}. The measured "
                f"panels stay.")
    return [
        _timeseries(1, "Acceptance length against the SLO"
                    + (" and break-even" if t.not_modelled is None else ""),
                    f"{m.tau_definition}. {m.per_request}.", "none", acceptance),
        modelled,
        _timeseries(3, "Speculation activity",
                    "Generated tokens without verify steps mean the draft is no longer used.",
                    "short", activity, width=6),
    ]


def memory_panels(pair: str, t: Thresholds, m: EngineMetrics) -> list[PanelBuilder]:
    budgeted = [("target weights", t.target_weight_bytes), ("draft weights", t.draft_weight_bytes),
                ("target KV pool", t.target_kv_bytes), ("draft KV pool", t.draft_kv_bytes)]
    queries = [_query(chr(ord("A") + i), f"vector({size})", f"budget: {label}")
               for i, (label, size) in enumerate(budgeted)]
    queries.append(_query("E", _series("specpair:kv_used_bytes", pair),
                          "KV in use, {{pool}} pool {{instance}}"))
    if m.target_kv_gib:
        queries.append(_query("F", _series("specpair:engine_kv_bytes", pair),
                              "engine: {{pool}} KV pool {{instance}}"))
    if m.target_weights_gib:
        queries.append(_query("G", _series("specpair:engine_weight_bytes", pair),
                              "engine: {{model}} weights {{instance}}"))
    panels: list[PanelBuilder] = [_timeseries(4, "Memory per GPU rank: budget and engine", (
        "Weights and both KV pools as budgeted (budget.md), the KV bytes in use (the engine's "
        "usage share times each budgeted pool), and what the engine reports. Not exported: "
        + "; ".join(m.not_exported) + "."), "bytes", queries, width=16)]
    legend, about = "budget: token capacity", "The budget's token capacity"
    if t.capacity_estimate is not None:  # the engine sizes its KV cache after warmup
        legend = f"budget: token capacity, ESTIMATED ({t.capacity_estimate})"
        about = ("The budget's token capacity, an estimate (kv_cache_sizing: measured: the "
                 "engine sizes its KV cache after warmup; its start-up log's 'GPU KV cache "
                 "size' is the figure, `specpair staging ingest` records it),")
    capacity = [_query("A", f"vector({t.max_total_tokens})", legend)]
    if m.kv_capacity_tokens:
        capacity.append(_query("B", _series("specpair:engine_kv_capacity_tokens", pair),
                               "engine {{instance}}"))
    panels.append(_timeseries(5, "KV token capacity", f"{about} beside the engine's, where it "
                              "exports one.", "short", capacity, width=8))
    return panels


def staging_panels(pair: str, t: Thresholds, m: EngineMetrics,
                   first_request: bool) -> list[PanelBuilder]:
    queries = [_query("A", f"vector({t.cold_start_budget_s:g})", "cold-start budget"),
               _query("B", f"vector({t.cold_start_plan_s:g})", "planned cold start")]
    if m.startup_seconds:
        queries.append(_query("C", _series("specpair:engine_startup_seconds", pair),
                              "engine start-up {{instance}}"))
    if first_request:  # the record exists (`alerts.watches_first_request`)
        queries.append(_query("D", _series("specpair:time_to_first_request_seconds", pair),
                              "first request after the process start {{instance}}"))
    cold = _timeseries(6, "Cold start against its budget", (
        "The budget and plan (staging.md) beside the engine's own start-up, or the time from "
        "the serving process's start to its first request, where the engine exports them; "
        "the alert SpecpairNotReadyWithinColdStartBudget fires when a target stays down "
        "for the whole budget."), "s", queries, width=16)
    up = stat.Panel().id(7).title("Engine up").datasource(DATASOURCE).height(8).span(8) \
        .with_target(_query("A", f"up{selector(pair, TARGETS)}", "{{instance}}"))
    # the canary gate's verdict (generate/canary_gate.py, canary-monitoring.k8s.yaml)
    canary = stat.Panel().id(8).title("What serves after the canary").description(
        "speculative: the canary passed; fallback: it failed and the target alone serves "
        "(the baseline launch); failed: it failed and the pod takes no traffic. The reasons "
        "name check, class and depth (alerts SpecpairCanaryFallback, SpecpairCanaryFailed)."
    ).datasource(DATASOURCE).height(6).span(24) \
        .with_target(_query("A", f"max by (instance, state) ("
                                 f"{_series('specpair_canary_state', pair)}) == 1",
                            "{{instance}}: {{state}}")) \
        .with_target(_query("B", f"max by (instance, check, class, depth) ("
                                 f"{_series('specpair_canary_reason', pair)})",
                            "{{instance}}: {{check}}, class {{class}}, depth {{depth}}"))
    return [cold, up, canary]


def build(a: Analysis) -> dict[str, object]:
    pair = a.pair
    m = for_engine(pair.engine, pair.source_file)
    t = a.thresholds
    name = pair.name
    board = dashboard.Dashboard(f"specpair: {pair.runbook.pair.title}") \
        .uid(f"specpair-{name}"[:40]).tags(["specpair", name, pair.engine]) \
        .description(" ".join([f"Generated by specpair from {pair.source_file}; do not "
                               "edit.", *marks(pair)])) \
        .time("now-6h", "now").refresh("1m").timezone("utc").editable()
    board = board.with_variable(
        dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"))
    board = board.with_variable(
        dashboard.QueryVariable("namespace").label("Namespace").datasource(DATASOURCE)
        .query(f"label_values(up{selector(name)}, namespace)")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True)
        .multi(True).all_value(".*"))
    in_namespace = selector(name, 'namespace=~"$namespace"')
    board = board.with_variable(
        dashboard.QueryVariable("instance").label("Instance").datasource(DATASOURCE)
        .query(f"label_values(up{in_namespace}, instance)")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True)
        .multi(True).all_value(".*"))
    rows: list[tuple[int, str, list[PanelBuilder]]] = [
        (100, "Latency: acceptance, SLO and break-even" if t.not_modelled is None
         else "Latency: acceptance and SLO", latency_panels(name, t, m)),
        (101, "Memory", memory_panels(name, t, m)),
        (102, "Staging", staging_panels(name, t, m, watches_first_request(pair, m)))]
    for row_id, title, panels in rows:
        board = board.with_row(dashboard.Row(title).id(row_id))
        for panel in panels:
            board = board.with_panel(panel)
    built: dict[str, object] = json.loads(JSONEncoder().encode(board.build()))
    return built


def generate(a: Analysis) -> dict[str, bytes]:
    text = json.dumps(build(a), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return {DASHBOARD: text.encode()}
