"""The measurement record (`runbooks/<pair>/measurements/<UTC time>.json`) and its summary
statistics. One record keeps together everything needed to repeat or audit a run."""

from __future__ import annotations

import math

from pydantic import Field

from specpair.schema.common import Strict


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0-100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


class Stats(Strict):
    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        return cls(p50=percentile(values, 50), p90=percentile(values, 90),
                   p99=percentile(values, 99),
                   mean=sum(values) / len(values) if values else None)


class RunResult(Strict):
    server: str = Field(description="baseline or speculative")
    requests: int
    succeeded: int
    failed: int
    truncated: bool = Field(description="the time limit cut the run short")
    wall_s: float
    output_tokens: int
    output_throughput: float = Field(description="output tokens per second, whole run")
    ttft_s: Stats
    tpot_s: Stats
    itl_s: Stats
    e2e_s: Stats
    acceptance_per_request: list[float] = Field(default_factory=list)
    acceptance_aggregate: float | None = Field(
        default=None, description="tokens per verify step from counters differenced "
                                  "around the run, bonus token included")
    counters: dict[str, float] = Field(default_factory=dict)
    accepted_per_position: list[float] = Field(
        default_factory=list,
        description="vLLM: the delta of `vllm:spec_decode_num_accepted_tokens_per_pos_total` "
                    "around the run, by position k = 0..K-1: drafts whose first k+1 tokens "
                    "were all accepted (so the entries sum to counters.accepted). Empty for "
                    "SGLang, which exports no per-position counter, for baselines, and in "
                    "records made before it was recorded")
    errors: list[str] = Field(default_factory=list)


class Cell(Strict):
    workload: str
    concurrency: int
    baseline: RunResult
    speculative: RunResult


class Protocol(Strict):
    pair: str
    engine: str
    target: dict[str, str | None]
    draft: dict[str, str | None] | None
    speculation: dict[str, object]
    workloads: list[dict[str, object]]
    prompt_sets: dict[str, str] = Field(description="workload → sha256 of its prompts")
    sampling: dict[str, object]
    concurrency: list[int]
    baseline_url: str
    speculative_url: str
    minimal_request: dict[str, object] = Field(
        description="one successful request and the start of its answer")


class Measurement(Strict):
    specpair_measurement: int = 1
    started_at: str
    protocol: Protocol
    cells: list[Cell]
