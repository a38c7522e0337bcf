"""The measurement record (`runbooks/<pair>/measurements/<UTC time>.json`) and its summary
statistics. One record keeps together everything needed to repeat or audit a run."""

from __future__ import annotations

from pydantic import Field

from specpair.bench.stats import Recorded, Stats, percentile
from specpair.bench.traffic import ReplayCell
from specpair.model.common import PastUtcTime, Strict

__all__ = ["Cell", "Measurement", "Protocol", "RunResult", "Stats", "percentile"]


class RunResult(Recorded):
    server: str = Field(description="baseline (the target alone), speculative (the pair as "
                                    "the runbook launches it: its schedule when it has one) "
                                    "or static (the pair at the schedule's largest K)")
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


class Cell(Recorded):
    workload: str
    concurrency: int
    baseline: RunResult
    speculative: RunResult
    static: RunResult | None = Field(
        default=None, description="the pair at its schedule's largest K without the "
                                  "schedule (`specpair bench --static`); absent without one "
                                  "and in records made before it was measured")
    replay: ReplayCell | None = Field(
        default=None, description="a replay workload: per-request outcomes and per-class "
                                  "statistics of both servers (no prompt text)")


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
    static_url: str | None = Field(default=None, description="the static-K server's URL")
    servers: dict[str, str] = Field(
        default_factory=dict,
        description="role → what that server ran: baseline, speculative, static (empty in "
                    "records made before it was recorded: baseline and speculative then)")
    minimal_request: dict[str, object] = Field(
        description="one successful request and the start of its answer")


class Measurement(Strict):
    specpair_measurement: int = 1
    started_at: PastUtcTime
    protocol: Protocol
    cells: list[Cell]
