"""Acceptance length as a function of draft depth: τ(d) = 1 + Σ_{k≤d} p_k.

p_k is the probability that the first k drafted tokens of a step are all accepted (the
bonus token makes the 1). Two sources give it:

- measured: vLLM's per-position counters, recorded by `specpair bench`
  (`vllm:spec_decode_num_accepted_tokens_per_pos_total` over
  `vllm:spec_decode_num_drafts_total`); known up to the depth that was measured and not
  extrapolated past it;
- one published or required τ at one depth: i.i.d. acceptance α solved from
  τ = (1 − α^{d+1}) / (1 − α) (Leviathan et al., Eq. 1), so p_k = α^k. A tree of top-k
  branches is treated as a chain of its depth whose α is the tree's own (the width stays
  what the τ was measured with).

Depth is what bounds a step's tokens: γ for a chain, num_steps for a tree, the block for
a block drafter (DSPARK's block is γ; DFLASH verifies its block including the bonus
token, so depth = block − 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from specpair.bench.record import Measurement


@dataclass(frozen=True)
class AcceptanceCurve:
    """τ by depth, from per-position rates (measured) or a geometric α (one τ)."""

    source: str
    rates: tuple[float, ...] = ()   # measured p_1..p_n; empty for a geometric curve
    alpha: float | None = None
    measured: bool = False

    @property
    def max_depth(self) -> int | None:
        """Deepest depth the curve knows; None: any (geometric)."""
        return len(self.rates) if self.measured else None

    def tau(self, depth: int) -> float | None:
        """Tokens per verify step at this depth, bonus included; None past the measured
        depth (no extrapolation)."""
        if depth < 0:
            raise ValueError(f"depth {depth} < 0")
        if self.measured:
            if depth > len(self.rates):
                return None
            return 1.0 + sum(self.rates[:depth])
        assert self.alpha is not None
        return geometric_tau(self.alpha, depth)


def geometric_tau(alpha: float, depth: int) -> float:
    if alpha >= 1.0:
        return depth + 1.0
    return (1 - alpha ** (depth + 1)) / (1 - alpha)


def solve_alpha(tau: float, depth: int) -> float:
    """The i.i.d. acceptance α at which `depth` drafts yield `tau` tokens per step."""
    if depth <= 0 or tau >= depth + 1:
        return 1.0
    if tau <= 1.0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(100):  # geometric_tau is increasing in α: bisection to float precision
        mid = (lo + hi) / 2
        if geometric_tau(mid, depth) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def from_tau(tau: float, depth: int, source: str) -> AcceptanceCurve:
    alpha = solve_alpha(tau, depth)
    return AcceptanceCurve(source=f"{source}: τ {tau:g} at depth {depth} → i.i.d. α "
                                  f"{alpha:.3f}", alpha=alpha)


@dataclass(frozen=True)
class PerPosition:
    """Per-position acceptance of one bench record, summed over its speculative runs."""

    rates: tuple[float, ...]
    drafts: float
    measured_depth: int
    started_at: str
    cells: int


def per_position(record: Measurement) -> PerPosition | None:
    """p_k = Σ accepted at position k / Σ drafts over the record's speculative runs; None
    when the record has no per-position counters (SGLang exports none; older records)."""
    counts: list[float] = []
    drafts = 0.0
    cells = 0
    for cell in record.cells:
        run = cell.speculative
        per_pos = list(getattr(run, "accepted_per_position", []) or [])
        steps = run.counters.get("verify_steps", 0.0)
        if not per_pos or not steps or run.failed:
            continue
        cells += 1
        drafts += steps
        if len(per_pos) > len(counts):
            counts.extend([0.0] * (len(per_pos) - len(counts)))
        for k, n in enumerate(per_pos):
            counts[k] += n
    if not drafts or not counts:
        return None
    gamma = record.protocol.speculation.get("num_speculative_tokens")
    depth = int(gamma) if isinstance(gamma, int) else len(counts)
    return PerPosition(rates=tuple(c / drafts for c in counts), drafts=drafts,
                       measured_depth=depth, started_at=record.started_at, cells=cells)


def measured_curve(record: Measurement) -> AcceptanceCurve | None:
    found = per_position(record)
    if found is None:
        return None
    return AcceptanceCurve(
        source=f"measured per position by `specpair bench` ({found.started_at}, "
               f"{found.cells} run(s), {found.drafts:,.0f} draft steps, depth "
               f"{len(found.rates)})",
        rates=found.rates, measured=True)
