"""The speculative-decoding metrics one engine release exports (engines/<release>/metrics.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineMetrics:
    engine: str
    generated_tokens: str
    """Counter of generated tokens: it keeps growing when the draft is silently dropped."""
    verify_steps: str
    """Counter of verify steps, the denominator of the acceptance length τ."""
    accepted: str | None
    """Counter of accepted draft tokens (bonus excluded) where τ = 1 + accepted / steps;
    None where the engine defines τ as generated tokens / verify steps."""
    running_requests: str
    kv_usage_fraction: str
    """Share of the KV token pool in use, 0 to 1 (both pools hold the same tokens)."""
    kv_capacity_tokens: str | None
    target_weights_gib: str | None
    target_kv_gib: str | None
    startup_seconds: tuple[str, str] | None
    """(metric, extra label matchers) of the engine's own start-up duration."""
    process_start: str | None
    """Unix time the serving process started (prometheus_client's process collector)."""
    requests_done: str | None
    """Counter of finished requests: its first increase after a start is the first request."""
    tau_definition: str
    per_request: str
    """Where per-request acceptance lives, and why no rule can read it."""
    not_exported: tuple[str, ...]
    source: str
    speculative_prefix: str
    """What every speculative-decoding series' name starts with: a server that exports
    none runs without its draft (`specpair bench`'s fallback check)."""
    drafted: str | None = None
    """Counter of proposed draft tokens, where the engine exports one."""
    accepted_per_position: str | None = None
    """Counter of accepted draft tokens labelled `position="k"`, k = 0..K-1, where the
    engine exports one (it also shows the draft tokens per step the server runs)."""
    draft_depth: tuple[str, str] | None = None
    """How the engine says which draft length it is running, for acceptance under a
    speculation schedule: ("tokens", counter of drafted tokens, whose rate over the verify
    steps' is the mean K) or ("gauge", the gauge of the current number of steps)."""
    process_metrics_with_data_parallel: bool = True
    """False where data parallelism > 1 runs several API servers on prometheus_client's
    multiprocess registry, which has no process collector (no process_start_time_seconds)."""

    def names(self) -> list[str]:
        """Every engine metric name the rules and dashboard use."""
        found = [self.generated_tokens, self.verify_steps, self.accepted,
                 self.running_requests, self.kv_usage_fraction, self.kv_capacity_tokens,
                 self.target_weights_gib, self.target_kv_gib,
                 self.startup_seconds[0] if self.startup_seconds else None,
                 self.process_start, self.requests_done,
                 self.draft_depth[1] if self.draft_depth else None]
        return sorted({n for n in found if n})
