"""Engine metrics: Prometheus text, speculative counters, per-response acceptance fields,
and the fallback detector (a server that is not speculating as the runbook says). The
metric names are the release's (`EngineMetrics`, engines/<release>/metrics.py): the
caller passes the metrics of the release it measures. The Prometheus text parser is the
canary's (`specpair.bench.canary_probe`, standard library only): one implementation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from specpair.bench.canary_probe import parse, per_position, total
from specpair.engines.bench_model import FallbackError
from specpair.engines.metrics_model import EngineMetrics

__all__ = ["parse", "per_position", "total"]  # re-exported: their callers import them here


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
