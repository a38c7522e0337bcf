"""Ranking a plan's rows: the score, one row per distinct prediction, the recommendation
among rows the model cannot tell apart, and the throughput/latency front."""

from __future__ import annotations

from typing import Any

from specpair.analyse.plan.evaluators import Evaluator
from specpair.analyse.plan.results import FrontPoint, Mode, Row


def score(mode: Mode, r: Row) -> tuple[float, ...]:
    """The sort key of a row, best first: per GPU throughput, or for a rate the fewest GPUs."""
    if mode == "rate":
        return (r.gpus, -r.tokens_per_s_per_request, r.tensor)
    return (-r.tokens_per_s_per_gpu, -r.tokens_per_s_per_request, r.gpus)


def front(mode: Mode, evaluators: dict[str, tuple[Evaluator, Row]]) -> list[FrontPoint]:
    """The throughput/latency front of the rows' predictions (in "max" mode, at the
    powers of two below each row's concurrency too)."""
    points: list[FrontPoint] = []
    for key, (ev, row) in evaluators.items():
        levels = [row.concurrency]
        if mode == "max":
            levels = sorted({c for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
                             if c < row.concurrency} | {row.concurrency})
        for c in levels:
            op = ev.at(c)
            points.append(FrontPoint(
                key=key, concurrency=c,
                tokens_per_s_per_gpu=round(op.throughput * row.replicas / row.gpus, 1),
                tokens_per_s_per_request=round(op.per_request, 1),
                speculative=row.depth > 0, label=f"{row.key} @ {c}"))
    found: list[FrontPoint] = []
    for p in sorted(points, key=lambda p: (-p.tokens_per_s_per_request,
                                           -p.tokens_per_s_per_gpu, p.label)):
        if not found or p.tokens_per_s_per_gpu > found[-1].tokens_per_s_per_gpu:
            found.append(p)
    return found


def _tied(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two predictions whose cross-validated intervals overlap: the model cannot rank them."""
    return a[0] <= b[1] and b[0] <= a[1]


def _change_count(r: Row) -> int:
    return len(r.changes) + (1 if r.depth == 0 else 0)  # dropping the draft is a change


def dedupe(rows: list[Row]) -> list[Row]:
    """One row per distinct prediction: settings that change nothing at this operating
    point (e.g. a memory fraction when the pool is not the limit) collapse into the
    variant with the fewest changes."""
    best: dict[tuple[Any, ...], Row] = {}
    order: list[tuple[Any, ...]] = []
    for r in rows:
        k = (r.gpu, r.gpus, r.replicas, r.tensor, r.kv_cache_dtype, r.shape, r.concurrency,
             r.tokens_per_s_per_gpu, r.tokens_per_s_per_request)
        if k not in best:
            order.append(k)
            best[k] = r
        elif (_change_count(r), r.key) < (_change_count(best[k]), best[k].key):
            best[k] = r
    return [best[k] for k in order]


def recommended_first(rows: list[Row], mode: Mode) -> list[Row]:
    """The rows with the recommendation first: of the rows the model cannot tell from the
    best, the one with the fewest changes to the runbook."""
    if not rows:
        return rows
    top = rows[0]
    if mode == "rate":
        # replicas are counted, not predicted: ties among the fewest GPUs on per-request speed
        ties = [r for r in rows if r.gpus == top.gpus and _tied(
            _scaled(r, r.tokens_per_s_per_request), _scaled(top, top.tokens_per_s_per_request))]
    else:
        ties = [r for r in rows if _tied(r.tokens_per_s_per_gpu_range,
                                         top.tokens_per_s_per_gpu_range)]
    pick = min(ties, key=lambda r: (_change_count(r), rows.index(r)))
    return [pick] + [r for r in rows if r is not pick]


def _scaled(r: Row, value: float) -> tuple[float, float]:
    """`value`'s interval with the row's relative throughput interval."""
    lo, hi = r.tokens_per_s_per_gpu_range
    base = r.tokens_per_s_per_gpu or 1.0
    return value * lo / base, value * hi / base
