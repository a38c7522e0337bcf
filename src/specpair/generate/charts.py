"""Charts for the site as self-contained, byte-deterministic SVG (specpair.generate.svg).

Written directly rather than by matplotlib, which laid out and wrote each glyph as a path
at about 0.3 s a chart (five a pair: most of a cold `specpair site`); the charts are the
same figures: stacked memory bars, speedup and break-even curves, the plan's front.
"""

from __future__ import annotations

from specpair.analyse.latency import LatencyModel, Point
from specpair.analyse.schedule import ScheduleReport
from specpair.analyse.stepmodel import StepTimes
from specpair.generate.svg import Plot, stacked_bars
from specpair.model.budget import Budget, GiB

COLORS = {"target weights": "#4c72b0", "draft weights": "#8172b3", "state pool": "#937860",
          "target KV": "#55a868", "draft KV": "#c44e52", "slack": "#cccccc"}
CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")
SLO_RED, REFERENCE_GREEN = "#c44e52", "#55a868"


def memory(budget: Budget) -> bytes:
    """Where each rank's memory goes, target alone vs with the draft (GiB)."""
    weights = {line.key: int(line.value) for line in budget.weights}
    rows = []
    for scenario, with_draft in ((budget.baseline, False), (budget.speculative, True)):
        if scenario is None:
            continue
        slack = next((int(line.value) for line in scenario.lines if line.key == "slack"), 0)
        parts = {"target weights": weights.get("target_weights", 0),
                 "draft weights": weights.get("draft_weights", 0) if with_draft else 0,
                 "state pool": scenario.state_pool_bytes, "target KV": scenario.target_kv_bytes,
                 "draft KV": scenario.draft_kv_bytes, "slack": slack}
        rows.append((scenario.name, [(k, v / GiB) for k, v in parts.items()]))
    return stacked_bars(rows, COLORS, f"GiB per GPU rank ({budget.gpu}, {budget.engine})")


def speedup_lines(m: LatencyModel) -> list[tuple[Point, list[tuple[float, float]]]]:
    """(point, [(τ, S)]) at a few concurrencies; S is the verdict's expected speedup
    (`StepTimes.speedup` on the point's step times), not τ / τ*."""
    taus = sorted({1 + i * (m.max_tokens_per_step - 1) / 50 for i in range(51)} | {m.slo})
    picks = sorted({m.curve[0].concurrency, m.concurrency, m.curve[-1].concurrency})
    lines = []
    for point in (p for p in m.curve if p.concurrency in picks):
        times = StepTimes(decode=point.t_decode_s, draft=point.t_draft_s,
                          verify=point.t_verify_s, per_token=point.t_per_token_s)
        lines.append((point, [(t, times.speedup(t)) for t in taus]))
    return lines


def speedup(m: LatencyModel) -> bytes:
    """Expected speedup against the acceptance length τ, at a few concurrencies."""
    plot = Plot("acceptance length τ (tokens per verify step, bonus included)",
                "expected speedup", height=340)
    for i, (point, line) in enumerate(speedup_lines(m)):
        plot.line([t for t, _ in line], [v for _, v in line], CYCLE[i % len(CYCLE)],
                  f"concurrency {point.concurrency} (τ* {point.break_even:.2f})")
    plot.hline(1.0, "#000000")
    plot.vline(m.slo, SLO_RED, f"SLO τ = {m.slo:g}", dash="5 3")
    if m.reference:
        plot.vline(m.reference, REFERENCE_GREEN, f"reference τ = {m.reference:g}", dash="2 3")
    return plot.svg()


def break_even(m: LatencyModel) -> bytes:
    """Break-even acceptance τ* against concurrency."""
    plot = Plot("concurrency (running requests)", "τ*", height=320, xlog2=True)
    plot.line([p.concurrency for p in m.curve], [p.break_even for p in m.curve], CYCLE[0],
              "break-even τ*", marker=True)
    plot.hline(m.slo, SLO_RED, f"SLO τ = {m.slo:g}", dash="5 3")
    if m.reference:
        plot.hline(m.reference, REFERENCE_GREEN, f"reference τ = {m.reference:g}", dash="2 3")
    return plot.svg()


def schedule(r: ScheduleReport) -> bytes:
    """Expected speedup against concurrency of every static K and of the schedule."""
    plot = Plot("concurrency (running requests)", "expected speedup over the target alone",
                height=340, xlog2=True)
    xs = [float(c) for c in r.concurrencies]
    for i, (k, values) in enumerate(r.static.items()):
        plot.line(xs, values, CYCLE[i % len(CYCLE)], f"static K = {k}",
                  dash="4 3")
    if r.scheduled:
        plot.line(xs, r.scheduled, "#000000", "schedule", marker=True)
    plot.hline(1.0, SLO_RED, "target alone", dash="5 3")
    return plot.svg()


def predicted_vs_published(rows: list[tuple[float, float, bool, bool]]) -> bytes:
    """Predicted against published speedup: (published, predicted, τ published, held out).

    The diagonal is a perfect prediction; the dotted lines are ×0.8 and ×1.25 of it."""
    values = [v for r in rows for v in r[:2]]
    lo, hi = min(values) * 0.9, max(values) * 1.1
    plot = Plot("published speedup (×)", "predicted speedup (×)", height=520)
    plot.line([lo, hi], [lo, hi], "#333333", "predicted = published")
    for k in (0.8, 1.25):  # clipped to the square: the axes stay the measurements'
        xs = [lo, hi / k] if k > 1 else [lo / k, hi]
        plot.line(xs, [x * k for x in xs], "#999999", dash="2 3")
    groups = (("τ published, fitted on", (True, False), "#4c72b0"),
              ("τ published, held out", (True, True), "#dd8452"),
              ("τ anchored (sweep trend only)", None, "#55a868"))
    for label, kind, color in groups:
        chosen = [r for r in rows if (not r[2] if kind is None else (r[2], r[3]) == kind)]
        if chosen:
            plot.points([r[0] for r in chosen], [r[1] for r in chosen], color, label)
    return plot.svg()


def plan_front(points: list[tuple[float, float, bool, bool]], title: str) -> bytes:
    """Every ranked operating point and the Pareto front: (tokens/s per request, tokens/s
    per GPU, with a draft, on the front)."""
    plot = Plot("output tokens/s per request", "output tokens/s per GPU", title=title,
                height=380)
    for spec, color, label in ((False, "#4c72b0", "target alone"),
                               (True, "#dd8452", "with the draft")):
        chosen = [p for p in points if p[2] is spec]
        if chosen:
            plot.points([p[0] for p in chosen], [p[1] for p in chosen], color, label,
                        opacity=0.45)
    front = sorted((p for p in points if p[3]), key=lambda p: p[0])
    if front:
        plot.line([p[0] for p in front], [p[1] for p in front], "#333333", "Pareto front",
                  marker=True)
    return plot.svg()
