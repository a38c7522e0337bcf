"""Per-request acceptance by class: what a replay run records, and its statistics.

τ of one request is the engine's own per-request figure: vLLM's
`metrics.speculative_decoding` (`mean_acceptance_length`, and `acceptance_histogram[j]`,
the verify steps that accepted exactly j draft tokens), SGLang's
`sglext.spec_tokens_details.spec_accept_length`. Where the engine gives none for a
request, its τ is absent (never estimated) and the class has only the run's counter τ
(`RunResult.acceptance_aggregate`, all classes pooled): that is the documented fallback.

τ by depth: pooling the class's histograms, P(A > k) = Σ_{j>k} h[j] / Σ h and
τ(γ) = 1 + Σ_{k<γ} P(A > k) (the derivation is in `specpair.bench.acceptance`).

A request "ran without speculation" on the pair when it decoded more than one token and
the engine reports no verify step for it (or no speculative metrics at all, while the
server gives them for other requests): the silent fallback operators report.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import Field

from specpair.bench.replay import ReplayRequest, ReplaySample, digest, schema_valid
from specpair.bench.stats import Recorded, Stats, percentile
from specpair.model.common import ClassLabel

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95


class RequestOutcome(Recorded):
    """One request of a replay on one server: no prompt, no answer text."""

    index: int
    label: ClassLabel
    error: str | None = None
    greedy: bool = Field(description="temperature 0: the pair must answer token for token "
                                     "as the target alone")
    output_tokens: int = 0
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float = 0.0
    tau: float | None = Field(default=None, ge=1, description="the engine's per-request τ "
                              "(bonus token included); None without a verify step")
    histogram: list[int] = Field(default_factory=list, description="vLLM: verify steps that "
                                 "accepted exactly j draft tokens, j = 0..K")
    spec_steps: int | None = None
    answer_sha256: str | None = Field(default=None, description="digest of the answer's "
                                      "token ids (else its text)")
    schema_valid: bool | None = Field(default=None, description="the answer follows the "
                                      "request's JSON schema; None without one")


class TauDistribution(Recorded):
    n: int
    mean: float
    p10: float
    p50: float
    p90: float
    percentile: int = Field(description="the runbook SLO's percentile")
    value: float = Field(description="τ at that percentile (nearest rank)")
    interval: tuple[float, float] = Field(description="bootstrap 95% interval of `value`")


class ClassStats(Recorded):
    requests: int
    succeeded: int
    output_tokens: int
    output_tokens_per_s: float = Field(description="Σ output tokens / Σ request time of "
                                                   "the class at the run's concurrency")
    ttft_s: Stats
    tpot_s: Stats
    tau: TauDistribution | None = None
    tau_by_depth: list[float] = Field(default_factory=list, description="τ(γ), γ = 1..K, "
                                      "from the class's pooled histograms")
    verify_steps: int = 0
    without_speculation: float | None = Field(
        default=None, description="share of the class's requests that ran without a "
                                  "verify step (pair only)")
    schema_requests: int = 0
    schema_valid: int = 0


class ReplayRun(Recorded):
    server: str
    classes: dict[ClassLabel, ClassStats]
    requests: list[RequestOutcome]


class Divergence(Recorded):
    index: int
    label: ClassLabel
    position: int = Field(description="first token (or character) where the pair's answer "
                                      "differs from the target alone's")
    compared: str = Field(description="token_ids or text")


class ReplayCell(Recorded):
    sha256: str
    requests: int
    baseline: ReplayRun
    speculative: ReplayRun
    greedy_compared: int = Field(description="temperature-0 requests compared token for token")
    divergences: list[Divergence] = Field(default_factory=list)


def outcome(request: ReplayRequest, sample: ReplaySample) -> RequestOutcome:
    if sample.error is not None:
        return RequestOutcome(index=request.index, label=request.label, error=sample.error,
                              greedy=request.temperature == 0, e2e_s=round(sample.e2e_s, 5))
    tokens = sample.output_tokens or len(sample.token_ids) or len(sample.itl_s) + 1
    tpot = (sample.e2e_s - (sample.ttft_s or 0)) / (tokens - 1) if tokens > 1 else None
    spec = sample.spec or {}
    histogram = [int(x) for x in spec.get("acceptance_histogram") or []]
    steps = spec.get("num_spec_steps")
    # no verify step, no acceptance: vLLM then reports mean_acceptance_length 1.0, which
    # is a placeholder, not a measurement; the request counts as run without speculation
    tau = None if steps == 0 else sample.acceptance
    answer = (",".join(map(str, sample.token_ids)) if sample.token_ids else sample.text)
    return RequestOutcome(
        index=request.index, label=request.label, greedy=request.temperature == 0,
        output_tokens=tokens, ttft_s=_round(sample.ttft_s),
        tpot_s=_round(tpot), e2e_s=round(sample.e2e_s, 5),
        tau=_round(tau), histogram=histogram,
        spec_steps=int(steps) if isinstance(steps, int) else None,
        answer_sha256=digest(answer.encode()), schema_valid=schema_valid(request, sample.text))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 5)


def bootstrap(values: Sequence[float], p: float, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of the nearest-rank p-th percentile; seeded, so a
    record's interval is reproducible from its values."""
    rng = random.Random(seed)
    stats = sorted(percentile(_resample(values, rng), p) or 0.0
                   for _ in range(BOOTSTRAP_RESAMPLES))
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = percentile(stats, tail), percentile(stats, 100 - tail)
    assert low is not None and high is not None
    return low, high


def _resample(values: Sequence[float], rng: random.Random) -> list[float]:
    """`[values[rng.randrange(n)] for _ in range(n)]`, draw for draw: CPython's
    `randrange(n)` takes `getrandbits(n.bit_length())` until it is below n
    (`Random._randbelow_with_getrandbits`, the same in 3.11, 3.12 and 3.13). Without
    randrange's argument handling the draws of a 10,000-request record's bootstrap take
    half the time; tests/bench/test_replay.py holds them equal to randrange's."""
    n = len(values)
    bits, draw = n.bit_length(), rng.getrandbits
    out = []
    for _ in range(n):
        r = draw(bits)
        while r >= n:
            r = draw(bits)
        out.append(values[r])
    return out


def distribution(values: list[float], p: int) -> TauDistribution | None:
    if not values:
        return None
    value = percentile(values, p)
    p10, p50, p90 = (percentile(values, q) for q in (10, 50, 90))
    assert value is not None and p10 is not None and p50 is not None and p90 is not None
    return TauDistribution(n=len(values), mean=round(sum(values) / len(values), 5),
                           p10=p10, p50=p50, p90=p90, percentile=p, value=value,
                           interval=bootstrap(values, p))


def tau_by_depth(histogram: list[int]) -> list[float]:
    steps = sum(histogram)
    if not steps:
        return []
    tails = [sum(histogram[k + 1:]) / steps for k in range(len(histogram) - 1)]
    return [round(1 + sum(tails[:g]), 5) for g in range(1, len(tails) + 1)]


def run_stats(role: str, outcomes: list[RequestOutcome], p: int) -> ReplayRun:
    classes: dict[str, ClassStats] = {}
    any_metrics = any(o.spec_steps is not None for o in outcomes)
    for label in sorted({o.label for o in outcomes}):
        mine = [o for o in outcomes if o.label == label]
        ok = [o for o in mine if o.error is None]
        pooled: list[int] = []
        for o in ok:
            if pooled and len(o.histogram) != len(pooled):
                pooled = []  # mixed draft depths: no pooled curve rather than a wrong one
                break
            pooled = [a + b for a, b in zip(pooled, o.histogram, strict=True)] if pooled \
                else list(o.histogram)
        decoding = [o for o in ok if o.output_tokens > 1]
        without = None
        if role == "speculative" and decoding and any_metrics:
            without = round(sum(1 for o in decoding if not o.spec_steps) / len(decoding), 5)
        busy = sum(o.e2e_s for o in ok)
        tokens = sum(o.output_tokens for o in ok)
        schema = [o for o in ok if o.schema_valid is not None]
        classes[label] = ClassStats(
            requests=len(mine), succeeded=len(ok), output_tokens=tokens,
            output_tokens_per_s=round(tokens / busy, 4) if busy else 0.0,
            ttft_s=Stats.of([o.ttft_s for o in ok if o.ttft_s is not None]),
            tpot_s=Stats.of([o.tpot_s for o in ok if o.tpot_s is not None]),
            tau=distribution([o.tau for o in ok if o.tau is not None], p),
            tau_by_depth=tau_by_depth(pooled), verify_steps=sum(pooled),
            without_speculation=without, schema_requests=len(schema),
            schema_valid=sum(1 for o in schema if o.schema_valid))
    return ReplayRun(server=role, classes=classes, requests=outcomes)


def first_divergence(a: ReplaySample, b: ReplaySample) -> tuple[int, str] | None:
    """Where two answers part: token ids where both servers return them, else text."""
    if a.token_ids and b.token_ids:
        x: Sequence[object] = a.token_ids
        y: Sequence[object] = b.token_ids
        compared = "token_ids"
    else:
        x, y, compared = a.text, b.text, "text"
    for i, (u, v) in enumerate(zip(x, y, strict=False)):
        if u != v:
            return i, compared
    return (min(len(x), len(y)), compared) if len(x) != len(y) else None
