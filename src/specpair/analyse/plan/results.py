"""The plan's results: its rows, the throughput/latency front, the counts of what the
search dropped, and the plan itself."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from specpair.model.common import Strict

Mode = Literal["concurrency", "max", "rate"]


class Row(Strict):
    key: str = Field(description="stable identity of the candidate")
    gpu: str
    gpus: int = Field(description="GPUs of all replicas")
    replicas: int
    tensor: int
    kv_cache_dtype: str
    memory_fraction: float | None = Field(description="None: the engine's default")
    shape: str
    depth: int = Field(description="most draft tokens a step can accept; 0: no draft")
    concurrency: int = Field(description="sequences in flight per replica")
    capacity: int = Field(description="most sequences one replica holds at the expected "
                                      "context")
    full_context_sequences: int = Field(
        default=0, description="most sequences one replica holds at the runbook's "
        "context_length (every sequence at its longest)")
    holds_concurrency: bool | None = Field(
        default=None, description="whether full_context_sequences reaches the concurrency "
        "the plan is asked for (None: no concurrency is asked). A candidate that does not "
        "is ranked below every one that does, and never beats one that does")
    tokens_per_s_per_gpu: float
    tokens_per_s_per_gpu_range: tuple[float, float] = Field(
        description="interval from the step model's cross-validated error")
    tokens_per_s_per_request: float
    tpot_ms: float
    tpot_ms_range: tuple[float, float]
    ttft_ms: float
    tau: float | None = Field(description="expected tokens per verify step at this depth")
    tau_slo: float | None = Field(description="the SLO carried to this depth")
    break_even: float | None = Field(description="τ* at this concurrency")
    break_even_range: tuple[float, float] | None = None
    slo_margin_pct: float | None = Field(description="(SLO τ / τ* − 1) · 100")
    kv_tokens: int
    kv_tokens_estimate: str | None = Field(
        default=None, description="the interval of a capacity the engine measures at "
        "start-up (vLLM 0.34.0, kv_cache_sizing: measured): kv_tokens and capacity are "
        "then estimates; None: the engine's figure by its own rules")
    budget_fits: bool
    budget_verdict: str
    meets_targets: bool
    notes: list[str]
    check_failures: list[str] = Field(description="gate rules that fail (ids and messages)")
    passes_check: bool
    changes: dict[str, Any] = Field(description="dotted runbook field → value (--write)")
    params_source: str
    validation_pct: float | None = Field(description="median absolute error, %, of the "
                                                     "step model on published speedups")
    validation: str = Field(description="the step model's error on published points of "
                                        "this GPU family × engine")


class FrontPoint(Strict):
    key: str
    concurrency: int
    tokens_per_s_per_gpu: float
    tokens_per_s_per_request: float
    speculative: bool
    label: str


class Comparison(Strict):
    """One candidate against another under the model that scored both (`plan.paired`)."""

    per_gpu: float = Field(description="ratio of tokens/s per GPU")
    per_gpu_interval: tuple[float, float]
    per_request: float = Field(description="ratio of tokens/s per request")
    per_request_interval: tuple[float, float]
    resolved: bool = Field(description="whether the model orders the two: the interval of "
                           "tokens/s per GPU (for a rate: per request) excludes 1")
    basis: str


class Counts(Strict):
    candidates: int
    deployments: int
    shapes: int
    refused_by_engine: int
    over_budget: int
    beyond_measured_depth: int
    no_operating_point: int
    fail_other_rules: int
    ranked: int
    not_modelled: int = Field(default=0, description="candidates the latency model refuses "
                              "by name (`stepmodel.deployment_refusal`): no number to rank")


class Plan(Strict):
    pair: str
    runbook: str
    engine: str
    mode: Mode
    concurrency_source: str = Field(description="where a fixed concurrency comes from")
    targets: dict[str, float | int | None]
    gpus: list[str]
    max_gpus: int
    acceptance_source: str
    slo_source: str
    expected_context: int
    prompt_tokens: int
    output_tokens: float
    rows: list[Row] = Field(description="ranked, best first (only what passes the engine "
                                        "rules and the budget)")
    front: list[FrontPoint]
    context_length: int = Field(default=0, description="the runbook's context_length: "
                                "full_context_sequences are counted at it")
    best: Row | None = Field(description="the first ranked passing candidate: no passing "
                             "candidate that holds the concurrency as well beats it on both "
                             "tokens/s per GPU and tokens/s per request")
    recommended: Row | None = Field(
        default=None, description="what --write applies: the best, or the candidate with "
        "the fewest changes whose difference from the best the model cannot resolve "
        "(recommended_against)")
    recommended_against: Comparison | None = Field(
        default=None, description="the best against the recommended, where they differ")
    best_speculative: Row | None
    current: Row | None = Field(description="the runbook as written, evaluated the same way")
    current_not_modelled: str | None = Field(
        default=None, description="why the runbook as written has no row: the latency model "
                                  "refuses its deployment by name")
    counts: Counts
    refusals: dict[str, int] = Field(description="engine rule → candidates it refused")
    seconds: float
    ms_per_candidate: float
    assumptions: list[str]
    unverified: list[str] = Field(
        default_factory=list, description="the runbook's declared unverified KV layouts: "
                                          "every candidate's budget is unverified")


