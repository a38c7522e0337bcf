"""Replay records built in memory: per-request outcomes and the record `specpair bench`
writes around them (the same models and statistics functions it uses)."""

from __future__ import annotations

from specpair.bench.record import Cell, Measurement, Protocol, RunResult, Stats
from specpair.bench.traffic import Divergence, ReplayCell, RequestOutcome, run_stats


def outcome(index: int, label: str, tau: float, histogram: list[int], *,
            valid: bool | None = None) -> RequestOutcome:
    return RequestOutcome(index=index, label=label, greedy=True, output_tokens=20,
                          ttft_s=0.01, tpot_s=0.005, e2e_s=0.1, tau=tau, histogram=histogram,
                          spec_steps=sum(histogram), answer_sha256="a" * 64,
                          schema_valid=valid)


def record(spec: list[RequestOutcome], *, divergences: list[Divergence] | None = None,
           sha: str = "b" * 64) -> Measurement:
    stats = Stats(p50=None, p90=None, p99=None, mean=None)
    run = RunResult(server="x", requests=len(spec), succeeded=len(spec), failed=0,
                    truncated=False, wall_s=1.0, output_tokens=1, output_throughput=1.0,
                    ttft_s=stats, tpot_s=stats, itl_s=stats, e2e_s=stats)
    base = [o.model_copy(update={"tau": None, "histogram": [], "spec_steps": None})
            for o in spec]
    replay = ReplayCell(sha256=sha, requests=len(spec), baseline=run_stats("baseline", base, 10),
                        speculative=run_stats("speculative", spec, 10),
                        greedy_compared=len(spec), divergences=divergences or [])
    protocol = Protocol(pair="p", engine="vllm 0.33.0", target={}, draft=None, speculation={},
                        workloads=[], prompt_sets={}, sampling={}, concurrency=[2],
                        baseline_url="b", speculative_url="s", minimal_request={})
    return Measurement(started_at="2026-12-01T10:00:00Z", protocol=protocol, cells=[
        Cell(workload="traffic", concurrency=2, baseline=run, speculative=run, replay=replay)])
