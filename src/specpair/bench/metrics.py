"""Engine metrics: Prometheus text, speculative counters, per-response acceptance fields,
and the fallback detector (a server that is not speculating as the runbook says). The
metric names are the release's (`EngineMetrics`, engines/<release>/metrics.py): the
caller passes the metrics of the release it measures."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from specpair.engines.bench_model import FallbackError
from specpair.engines.metrics_model import EngineMetrics

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse(text: str) -> dict[str, dict[str, float]]:
    """{metric: {labels: value}}; `*_created` timestamps are skipped."""
    series: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match or match.group(1).endswith("_created"):
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        series.setdefault(match.group(1), {})[match.group(2) or ""] = value
    return series


def total(series: dict[str, dict[str, float]], name: str) -> float:
    return sum(series.get(name, {}).values())


def per_position(series: dict[str, dict[str, float]], name: str) -> list[float]:
    """The values of a counter labelled by `position="k"`, ordered by k (summed over its
    other labels, e.g. vLLM's `engine`); empty when the server exports no such counter.
    Positions must run 0..K-1 without a gap, as vLLM labels them (`range(num_spec_tokens)`
    in `SpecDecodingProm.__init__`, vllm/v1/spec_decode/metrics.py)."""
    by_position: dict[int, float] = {}
    for labels, value in series.get(name, {}).items():
        match = re.search(r'position="(\d+)"', labels)
        if match is None:
            raise ValueError(f"{name} series without a position label: {labels or '{}'}")
        k = int(match.group(1))
        by_position[k] = by_position.get(k, 0.0) + value
    if sorted(by_position) != list(range(len(by_position))):
        raise ValueError(f"{name} positions are not 0..K-1: {sorted(by_position)}")
    return [by_position[k] for k in range(len(by_position))]


def speculative_metric_names(series: dict[str, dict[str, float]], engine: EngineMetrics
                             ) -> list[str]:
    return sorted(n for n in series if n.startswith(engine.speculative_prefix))


@dataclass(frozen=True)
class CounterDelta:
    engine: str
    """The release whose counters these are (EngineMetrics.engine)."""
    verify_steps: float      # vLLM: drafts (request × step); SGLang: verify calls
    accepted: float          # draft tokens accepted (bonus excluded)
    drafted: float
    generated: float
    # vLLM: drafts whose first k+1 tokens were all accepted, for k = 0..K-1 (see
    # `specpair.bench.acceptance` for where vLLM counts it); SGLang exports no such counter.
    accepted_per_position: tuple[float, ...] = ()
    counts_accepted: bool = False
    """τ = 1 + accepted / steps (the engine counts accepted draft tokens); otherwise
    τ = generated / steps (EngineMetrics.tau_definition of the release)."""

    @property
    def acceptance_length(self) -> float | None:
        """Mean tokens per verify step, bonus token included, as the engines count it."""
        if not self.verify_steps:
            return None
        if self.counts_accepted:
            return 1 + self.accepted / self.verify_steps
        return self.generated / self.verify_steps


def delta(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]],
          engine: EngineMetrics) -> CounterDelta | None:
    """The speculative counters' growth between two scrapes of one server of `engine`'s
    release; None where the later scrape has no verify-step counter (no speculation)."""
    def d(name: str | None) -> float:
        return total(after, name) - total(before, name) if name else 0.0
    if engine.verify_steps not in after:
        return None
    moved: tuple[float, ...] = ()
    name = engine.accepted_per_position
    if name is not None:
        positions = per_position(after, name)
        earlier = per_position(before, name) or [0.0] * len(positions)
        if len(earlier) != len(positions):
            raise ValueError(f"{name} changed its positions between two scrapes "
                             f"({len(earlier)} then {len(positions)}): the server restarted")
        moved = tuple(a - b for a, b in zip(positions, earlier, strict=True))
    counts_accepted = engine.accepted is not None
    # the counters τ is defined by (EngineMetrics.tau_definition): accepted and drafted
    # tokens where the engine counts accepted ones, else generated tokens
    return CounterDelta(engine.engine, d(engine.verify_steps),
                        d(engine.accepted), d(engine.drafted),
                        0.0 if counts_accepted else d(engine.generated_tokens), moved,
                        counts_accepted=counts_accepted)


def response_acceptance(body: dict[str, Any]) -> float | None:
    """Per-request acceptance length from a (final) response body, where the engine gives
    one: SGLang `sglext.spec_tokens_details.spec_accept_length` (bonus included), vLLM
    `metrics.speculative_decoding.mean_acceptance_length`."""
    sglext = body.get("sglext") or {}
    details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
    if isinstance(details, list):
        details = details[0] if details else None
    if isinstance(details, dict) and details.get("spec_accept_length") is not None:
        return float(details["spec_accept_length"])
    metrics = body.get("metrics") or {}
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if isinstance(spec, dict) and spec.get("mean_acceptance_length") is not None:
        return float(spec["mean_acceptance_length"])
    return None


def check_speculative_server(series: dict[str, dict[str, float]], engine: EngineMetrics, *,
                             expected_k: int | None) -> None:
    """`expected_k`: the draft tokens per step the release labels per position (vLLM's
    per-position counter), None where it exports none."""
    names = speculative_metric_names(series, engine)
    if not names:
        raise FallbackError("the speculative server exposes no speculative-decoding metrics: "
                            "it runs without a draft (check its launch command and log)")
    per_pos = engine.accepted_per_position
    if expected_k is not None and per_pos is not None and per_pos in series:
        positions = {int(m.group(1)) for labels in series[per_pos]
                     if (m := re.search(r'position="(\d+)"', labels))}
        if positions and max(positions) + 1 != expected_k:
            raise FallbackError(f"the server drafts {max(positions) + 1} tokens per step, the "
                                f"runbook {expected_k}: it runs another speculative config")


def check_baseline_server(series: dict[str, dict[str, float]], engine: EngineMetrics) -> None:
    if speculative_metric_names(series, engine):
        raise FallbackError("the baseline server speculates: it is not a baseline")
