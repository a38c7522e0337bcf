"""One replay workload at one concurrency: the same captured requests to the target alone
and to the pair, engine counters differenced around each run, per-class statistics and
the token-for-token comparison of the greedy answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from specpair.bench import metrics
from specpair.bench.client import Sample, summarize
from specpair.bench.record import Cell
from specpair.bench.replay import ReplayRequest, ReplaySample, load
from specpair.bench.traffic import (
    Divergence,
    ReplayCell,
    first_divergence,
    outcome,
    run_stats,
)
from specpair.engines.metrics_model import EngineMetrics
from specpair.model.errors import SpecpairError
from specpair.model.runbook import Workload

Scrape = Callable[[str], dict[str, dict[str, float]]]


def requests_of(workload: Workload, folder: Path) -> list[ReplayRequest]:
    assert workload.file is not None and workload.sha256 is not None, "rules.check_runbook"
    return load(folder, workload.file, workload.sha256, f"workloads {workload.name}")


def measure(workload: Workload, requests: list[ReplayRequest], concurrency: int,
            urls: dict[str, str], models: dict[str, str], extras: Mapping[str, Any],
            time_limit_s: float,
            percentile: int, scrape: Scrape, say: Callable[[str], None],
            engine: EngineMetrics) -> Cell:
    from specpair.bench.replay import run_load

    assert workload.sha256 is not None
    results = {}
    answers: dict[str, dict[int, ReplaySample]] = {}
    for role in ("baseline", "speculative"):
        url = urls[role]
        say(f"[{workload.name} c={concurrency} {role}] {len(requests)} replayed requests")
        before = scrape(url)
        samples, wall, truncated = asyncio.run(run_load(
            url, models[role], requests, extras, concurrency, time_limit_s))
        try:
            delta = metrics.delta(before, scrape(url), engine)
        except ValueError as exc:
            raise SpecpairError.single(url, f"unreadable speculative counters: {exc}",
                                       "rerun against a server that stays up") from None
        if role == "speculative" and (delta is None or not delta.verify_steps):
            raise SpecpairError.single(
                url, "unexpected fallback: the speculative counters did not move during "
                "the replay", "check the server log for a disabled draft")
        answers[role] = samples
        flat = [Sample(ttft_s=s.ttft_s, itl_s=s.itl_s, e2e_s=s.e2e_s,
                       output_tokens=s.output_tokens, acceptance=s.acceptance, error=s.error)
                for s in samples.values()]
        run = summarize(role, flat, wall, truncated, len(requests), delta)
        results[role] = run.model_copy(update={"errors": sorted({s.error for s in flat
                                                                  if s.error})[:10]})
    runs = {role: run_stats(role, [outcome(r, answers[role][r.index]) for r in requests
                                   if r.index in answers[role]], percentile)
            for role in answers}
    divergences = []
    compared = 0
    for r in requests:
        a, b = answers["baseline"].get(r.index), answers["speculative"].get(r.index)
        if r.temperature != 0 or a is None or b is None or a.error or b.error:
            continue
        compared += 1
        found = first_divergence(a, b)
        if found is not None:
            divergences.append(Divergence(index=r.index, label=r.label, position=found[0],
                                          compared=found[1]))
    return Cell(workload=workload.name, concurrency=concurrency, baseline=results["baseline"],
                speculative=results["speculative"],
                replay=ReplayCell(sha256=workload.sha256, requests=len(requests),
                                  baseline=runs["baseline"], speculative=runs["speculative"],
                                  greedy_compared=compared, divergences=divergences))
