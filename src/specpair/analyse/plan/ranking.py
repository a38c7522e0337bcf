"""Ranking a plan's rows: the score, one row per distinct prediction, the best (no passing
candidate beats it on both tokens/s per GPU and per request), the recommendation among
rows whose difference from the best the model cannot resolve, and the front."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specpair.analyse.plan.evaluators import Evaluator
from specpair.analyse.plan.results import Comparison, FrontPoint, Mode, Row


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


def _change_count(r: Row) -> int:
    return len(r.changes) + (1 if r.depth == 0 else 0)  # dropping the draft is a change


def dedupe(rows: list[Row]) -> list[Row]:
    """One row per distinct prediction: settings that change nothing at this operating
    point (e.g. a memory fraction when the pool is not the limit) collapse into the
    variant with the fewest changes."""
    best: dict[tuple[Any, ...], Row] = {}
    order: list[tuple[Any, ...]] = []
    for r in rows:
        # holding full contexts or not is a difference, though the throughput is the same
        k = (r.gpu, r.gpus, r.replicas, r.tensor, r.kv_cache_dtype, r.shape, r.concurrency,
             r.tokens_per_s_per_gpu, r.tokens_per_s_per_request, r.holds_concurrency)
        if k not in best:
            order.append(k)
            best[k] = r
        elif (_change_count(r), r.key) < (_change_count(best[k]), best[k].key):
            best[k] = r
    return [best[k] for k in order]


def ranked(mode: Mode, rows: list[Row]) -> list[Row]:
    """Passing rows first, then the rest; in each, the candidates that hold the asked
    concurrency at full context before those that do not, then by score."""
    return sorted(rows, key=lambda r: (not r.passes_check, r.holds_concurrency is False,
                                       *score(mode, r)))


def beats(a: Row, b: Row) -> bool:
    """`a` serves more tokens/s per GPU and per request than `b`, and holds the asked
    concurrency at full context wherever `b` does (one that cannot hold it is not better
    than one that can, whatever its throughput at the mean context)."""
    return (a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu
            and a.tokens_per_s_per_request > b.tokens_per_s_per_request
            and (a.holds_concurrency is not False or b.holds_concurrency is False))


def best_first(rows: list[Row]) -> tuple[Row | None, list[Row]]:
    """The best (the first ranked passing row that no passing row beats) and the rows
    with it first."""
    passing = [r for r in rows if r.passes_check]
    best = next((r for r in passing if not any(beats(o, r) for o in passing)), None)
    if best is None:
        return None, rows
    return best, [best] + [r for r in rows if r is not best]


def recommend(mode: Mode, best: Row, rows: list[Row],
              against: Callable[[Row, Row], Comparison]) -> tuple[Row, Comparison | None]:
    """Of the passing rows whose difference from the best the model cannot resolve (the
    best's advantage, under the model that scored both: `paired.compare`), the one with
    the fewest changes to the runbook; with the best against it where it is not the best.
    For a rate the GPUs are counted, not predicted: only rows with the best's GPUs tie."""
    found: list[tuple[Row, Comparison | None]] = [(best, None)]
    for r in rows:
        if r is best or not r.passes_check or (r.holds_concurrency is False
                                                and best.holds_concurrency is not False):
            continue
        if mode == "rate" and r.gpus != best.gpus:
            continue
        c = against(best, r)
        if not c.resolved:
            found.append((r, c))
    return min(found, key=lambda f: (_change_count(f[0]), rows.index(f[0])))
