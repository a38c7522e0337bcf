"""`canary.json` and `canary.py`: the canary before traffic, for a deployment without
specpair installed. canary.py is specpair.bench.canary_probe's source, byte for byte (the
code `specpair canary` runs); canary.json pins what it sends and how it judges:

- the requests: the first prompts of each synthetic workload (`canary.requests_per_class`,
  or the concurrency where that is more: `per_class`) at temperature 0, at most
  `canary.max_tokens` each (captured traffic never goes into a
  generated file: `specpair canary --record` replays it from memory);
- the concurrency: the deployment's (where a speculation schedule drafts nothing there,
  the largest concurrency at which it drafts, said in `concurrency_note`);
- the threshold: break-even τ* at that concurrency (the pair's analysis, breakeven.json)
  × (1 + the SLO's margin: its provenance's where `slo propose` set it, else 0.05, the
  default of `slo propose --margin`);
- the release's metric names, request fields and bounds.
"""

from __future__ import annotations

from typing import Any

from specpair.analyse.analysis import Analysis
from specpair.bench.canary_probe import FORMAT, MAX_CLASSES, MAX_REQUESTS
from specpair.bench.workloads import generate as prompts
from specpair.engines.verified_layouts import declared_notes
from specpair.generate.render import dump_json
from specpair.load.packaged import canary_probe_source
from specpair.model.kubernetes import pair_labels
from specpair.model.runbook import Runbook, Workload
from specpair.resolve.pair import ResolvedPair

DEFAULT_MARGIN = 0.05
"""The SLO margin where the runbook's SLO has no provenance (`slo propose --margin`)."""
MAX_ANSWER_BYTES = 1 << 20
MAX_METRICS_BYTES = 16 << 20   # as `specpair bench` reads an engine's /metrics


def margin(rb: Runbook) -> tuple[float, str]:
    provenance = rb.acceptance.slo.provenance
    if provenance is not None:
        return provenance.margin, "the SLO's margin (acceptance.slo.provenance.margin)"
    return DEFAULT_MARGIN, (f"{DEFAULT_MARGIN:g}, the default SLO margin (`slo propose "
                            "--margin`): the SLO has no provenance")


def static_depth(a: Analysis) -> int:
    """The most draft tokens one verify step can accept: the latency model's shape where it
    models the pair, else the runbook's chain length (or tree depth)."""
    if a.modelled is not None:
        return a.modelled.max_tokens_per_step - 1
    spec = a.pair.runbook.speculation
    return spec.num_speculative_tokens or spec.num_steps or spec.block_size or 0


def _depth(a: Analysis, concurrency: int) -> tuple[int, int, str | None]:
    """(concurrency, K drafted there, a note where the schedule moved the concurrency)."""
    schedule = a.pair.schedule
    if schedule is None:
        return concurrency, static_depth(a), None
    k = schedule.k_at(concurrency)
    if k > 0:
        return concurrency, k, None
    drafting = [r for r in schedule.ranges if r.k > 0 and r.start <= concurrency]
    if not drafting:
        return concurrency, 0, "the schedule drafts nothing up to the deployment's concurrency"
    last = max(drafting, key=lambda r: r.end)
    return last.end, last.k, (f"the schedule drafts nothing at concurrency {concurrency}: "
                              f"the canary runs at {last.end}, the largest that drafts")


def threshold(a: Analysis, depth: int, concurrency: int) -> dict[str, Any]:
    """τ* × (1 + margin) at the canary's concurrency: the deployment's (breakeven.json's
    headline), or where a schedule moved it, the curve's point there (else the next one
    above: the stricter)."""
    found = a.thresholds
    if found.break_even is None:
        return {"min_tau": None, "why_none": a.not_modelled or "no break-even τ* for this "
                "deployment", "source": "breakeven.json"}
    at, tau = found.concurrency, found.break_even
    if concurrency != at and found.curve:
        at, tau = min(((c, t) for c, t in found.curve if c >= concurrency),
                      default=found.curve[-1])
    m, why = margin(a.pair.runbook)
    floor = round(tau * (1 + m), 4)
    out: dict[str, Any] = {"min_tau": floor, "break_even": tau, "margin": m,
                           "source": f"break-even τ* at concurrency {at} "
                           f"(breakeven.json) × (1 + {why})"}
    if floor > 1 + depth:
        out["note"] = (f"τ cannot exceed 1 + K = {1 + depth} at depth {depth}: the pair "
                       "cannot pass this canary as configured")
    latency = a.modelled
    if latency is not None and latency.uncertainty.few_points:
        # the same mark breakeven.json and the capacity records carry: a prior's τ*
        point = next((p for p in latency.curve if p.concurrency == at), latency.at_concurrency)
        lo, hi = point.break_even_range
        out["unverified"] = (f"τ* is a prior's: no published points of this drafter family "
                             f"here ({latency.uncertainty.speedup_basis}); τ* interval "
                             f"{lo:g}–{hi:g}; measure the pair (`specpair bench`, "
                             "`specpair calibrate`)")
    return out


def per_class(rb: Runbook, classes: int, concurrency: int) -> int:
    """Requests per class: the runbook's, or enough to run at the concurrency, within the
    canary's bound on requests in all."""
    return max(1, min(max(rb.canary.requests_per_class, concurrency),
                      MAX_REQUESTS // max(1, classes)))


def _requests(workload: Workload, rb: Runbook, n: int) -> list[dict[str, Any]]:
    chosen = prompts(workload)[:n]
    return [{"path": "/v1/completions", "body": {
        "prompt": r.prompt, "max_tokens": min(r.max_tokens, rb.canary.max_tokens),
        "temperature": 0, "ignore_eos": True}} for r in chosen]


def synthetic_classes(rb: Runbook, concurrency: int) -> list[dict[str, Any]]:
    """One class per synthetic workload (the runbook's default set where it has none)."""
    workloads = [w for w in rb.workloads if w.kind != "replay"] or list(
        Runbook.model_fields["workloads"].get_default(call_default_factory=True))
    chosen = workloads[:MAX_CLASSES]
    n = per_class(rb, len(chosen), concurrency)
    return [{"name": w.name, "requests": _requests(w, rb, n)} for w in chosen]


def config(a: Analysis) -> dict[str, Any]:
    pair, rb = a.pair, a.pair.runbook
    release = pair.release
    metrics, probe = release.metrics, release.bench
    concurrency, depth, note = _depth(a, max(1, a.thresholds.concurrency))
    lossless: dict[str, Any] = (
        {"extras": dict(probe.without_speculation)} if probe.without_speculation is not None
        else {"not_checked": probe.without_speculation_why})
    out: dict[str, Any] = {
        "format": FORMAT, "pair": pair.name, "engine": pair.engine,
        "concurrency": concurrency, "depth": depth, "positions": probe.draft_positions(pair),
        "metrics": {"prefix": metrics.speculative_prefix, "verify_steps": metrics.verify_steps,
                    "accepted": metrics.accepted, "drafted": metrics.drafted,
                    "generated": metrics.generated_tokens,
                    "per_position": metrics.accepted_per_position},
        "threshold": threshold(a, depth, concurrency),
        "request_extras": dict(probe.request_extras), "lossless": lossless,
        "on_failure": rb.canary.on_failure,
        "bounds": {"deadline_s": rb.canary.timeout_s,
                   "request_timeout_s": min(rb.canary.timeout_s, rb.staging.warmup.timeout_s),
                   "max_answer_bytes": MAX_ANSWER_BYTES, "max_metrics_bytes": MAX_METRICS_BYTES},
        "classes": synthetic_classes(rb, concurrency)}
    if note is not None:
        out["concurrency_note"] = note
    if declared_notes(pair):  # τ* rests on a budget of an unverified layout
        out["unverified"] = declared_notes(pair)
    return out


def config_text(a: Analysis) -> str:
    return dump_json(config(a)).decode("utf-8")


def probe_text() -> str:
    return canary_probe_source()


def monitoring(pair: ResolvedPair) -> tuple[str, str]:
    """The canary's alerts as a rule file, and as a PrometheusRule with the PodMonitor that
    scrapes the verdict's port (beside the engine's own in monitoring.k8s.yaml)."""
    from specpair.analyse.alerts import PAIR_LABEL
    from specpair.generate.canary_gate import rule_group
    from specpair.generate.monitoring_files import SCRAPE_INTERVAL, dump, object_labels

    group = rule_group(pair.name)
    head = "".join(f"# {line}\n" for line in (
        f"The canary's alerts of {pair.name}: which launch serves after the canary before "
        "traffic, and why it failed.",
        f"Generated by specpair from {pair.source_file}; do not edit.",
        f"Series: specpair_canary_state and specpair_canary_reason, served on port "
        f"{pair.runbook.canary.metrics_port} (`canary`) by the deployment's canary gate; "
        f"a plain scrape config must scrape it and set {PAIR_LABEL}=\"{pair.name}\"."))
    match = pair_labels(pair.name)
    if pair.runbook.deployment.nodes > 1:  # the leader alone serves and runs the gate
        match["leaderworkerset.sigs.k8s.io/worker-index"] = "0"
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
               "metadata": {"name": f"{pair.name}-canary", "labels": object_labels(pair)},
               "spec": {"selector": {"matchLabels": match}, "podMetricsEndpoints": [{
                   "port": "canary", "path": "/metrics", "interval": SCRAPE_INTERVAL,
                   "relabelings": [{"action": "replace", "targetLabel": PAIR_LABEL,
                                    "replacement": pair.name}]}]}}
    rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": f"{pair.name}-canary", "labels": object_labels(pair)},
            "spec": {"groups": [group]}}
    return (head + dump({"groups": [group]}),
            head + dump(rule) + "---\n" + dump(monitor))


def generate(a: Analysis) -> dict[str, bytes]:
    rules, manifest = monitoring(a.pair)
    return {"canary.json": config_text(a).encode(), "canary.py": probe_text().encode(),
            "canary-rules.yaml": rules.encode(), "canary-monitoring.k8s.yaml": manifest.encode()}
