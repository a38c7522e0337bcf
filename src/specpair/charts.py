"""Charts for the site, drawn with matplotlib as self-contained, byte-deterministic SVG.

Determinism: the Agg backend, glyphs written as paths (no font lookup in the browser),
a fixed SVG id salt, and no creation date in the metadata.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from specpair.budget.model import Budget, GiB
from specpair.latency import LatencyModel, Point
from specpair.stepmodel import StepTimes

plt.rcParams.update({"svg.hashsalt": "specpair", "svg.fonttype": "path",
                     "font.family": "DejaVu Sans", "font.size": 9,
                     "axes.spines.top": False, "axes.spines.right": False})
COLORS = {"target weights": "#4c72b0", "draft weights": "#8172b3", "state pool": "#937860",
          "target KV": "#55a868", "draft KV": "#c44e52", "slack": "#cccccc"}


def _svg(fig: Figure) -> bytes:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None},
                bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue().encode()


def memory(budget: Budget) -> bytes:
    """Where each rank's memory goes, target alone vs with the draft (GiB)."""
    weights = {line.key: int(line.value) for line in budget.weights}
    rows = []
    for scenario, with_draft in ((budget.baseline, False), (budget.speculative, True)):
        if scenario is None:
            continue
        slack = next((int(line.value) for line in scenario.lines if line.key == "slack"), 0)
        rows.append((scenario.name, {
            "target weights": weights.get("target_weights", 0),
            "draft weights": weights.get("draft_weights", 0) if with_draft else 0,
            "state pool": scenario.state_pool_bytes, "target KV": scenario.target_kv_bytes,
            "draft KV": scenario.draft_kv_bytes, "slack": slack}))
    fig, ax = plt.subplots(figsize=(7.0, 1.0 + 0.6 * len(rows)))
    for y, (_, parts) in enumerate(rows):
        left = 0.0
        for part, value in parts.items():
            ax.barh(y, value / GiB, left=left, color=COLORS[part], label=part if y == 0 else None)
            left += value / GiB
    ax.set_yticks(range(len(rows)), [name for name, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"GiB per GPU rank ({budget.gpu}, {budget.engine})")
    ax.legend(ncol=3, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.45),
              frameon=False)
    return _svg(fig)


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
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    for point, line in speedup_lines(m):
        ax.plot([t for t, _ in line], [v for _, v in line],
                label=f"concurrency {point.concurrency} (τ* {point.break_even:.2f})")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axvline(m.slo, color="#c44e52", linestyle="--", linewidth=1, label=f"SLO τ = {m.slo:g}")
    if m.reference:
        ax.axvline(m.reference, color="#55a868", linestyle=":", linewidth=1,
                   label=f"reference τ = {m.reference:g}")
    ax.set_xlabel("acceptance length τ (tokens per verify step, bonus included)")
    ax.set_ylabel("expected speedup")
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)


def break_even(m: LatencyModel) -> bytes:
    """Break-even acceptance τ* against concurrency."""
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    ax.plot([p.concurrency for p in m.curve], [p.break_even for p in m.curve], marker="o",
            label="break-even τ*")
    ax.axhline(m.slo, color="#c44e52", linestyle="--", linewidth=1, label=f"SLO τ = {m.slo:g}")
    if m.reference:
        ax.axhline(m.reference, color="#55a868", linestyle=":", linewidth=1,
                   label=f"reference τ = {m.reference:g}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (running requests)")
    ax.set_ylabel("τ*")
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)


def predicted_vs_published(rows: list[tuple[float, float, bool, bool]]) -> bytes:
    """Predicted against published speedup: (published, predicted, τ published, held out).

    The diagonal is a perfect prediction; the dashed lines are ×0.8 and ×1.25 of it."""
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    values = [v for r in rows for v in r[:2]]
    lo, hi = min(values) * 0.9, max(values) * 1.1
    ax.plot([lo, hi], [lo, hi], color="#333333", linewidth=1, label="predicted = published")
    for k, style in ((0.8, ":"), (1.25, ":")):
        ax.plot([lo, hi], [lo * k, hi * k], color="#999999", linestyle=style, linewidth=1)
    groups = (("τ published, fitted on", (True, False), "#4c72b0", "o"),
              ("τ published, held out", (True, True), "#dd8452", "s"),
              ("τ anchored (sweep trend only)", None, "#55a868", "^"))
    for label, kind, color, marker in groups:
        chosen = [r for r in rows if (not r[2] if kind is None else (r[2], r[3]) == kind)]
        if chosen:
            ax.scatter([r[0] for r in chosen], [r[1] for r in chosen], s=22, color=color,
                       marker=marker, label=label, zorder=3)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published speedup (×)")
    ax.set_ylabel("predicted speedup (×)")
    ax.legend(frameon=False, fontsize=8, loc="upper left")
    return _svg(fig)


def plan_front(points: list[tuple[float, float, bool, bool]], title: str) -> bytes:
    """Every ranked operating point and the Pareto front: (tokens/s per request, tokens/s
    per GPU, with a draft, on the front)."""
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    for spec, color, label in ((False, "#4c72b0", "target alone"),
                               (True, "#dd8452", "with the draft")):
        chosen = [p for p in points if p[2] is spec]
        if chosen:
            ax.scatter([p[0] for p in chosen], [p[1] for p in chosen], s=12, color=color,
                       alpha=0.45, label=label, zorder=2)
    front = sorted((p for p in points if p[3]), key=lambda p: p[0])
    if front:
        ax.plot([p[0] for p in front], [p[1] for p in front], color="#333333", marker="o",
                markersize=4, linewidth=1.2, label="Pareto front", zorder=3)
    ax.set_xlabel("output tokens/s per request")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)
