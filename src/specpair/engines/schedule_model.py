"""A speculation schedule as the engines render it: K per batch-size range, resolved.

`specpair.analyse.schedule` makes one from the runbook (`speculation.schedule`: derived from the
step model, or pinned by hand); a release's launch renders it in its own form (vLLM's
`num_speculative_tokens_per_batch_size`, SGLang's adaptive tiers) or says, citing its
code, why it cannot run one.
"""

from __future__ import annotations

from pydantic import Field

from specpair.model.common import NonNegativeInt, PositiveInt, Strict


class ScheduledRange(Strict):
    start: PositiveInt = Field(description="smallest batch of the range, inclusive")
    end: PositiveInt = Field(description="largest batch of the range, inclusive")
    k: NonNegativeInt = Field(description="draft tokens per step; 0: the target alone")
    candidates: list[NonNegativeInt] = Field(
        description="depths the model cannot tell from k here (its cross-validated "
                    "interval): an engine that picks among candidates by the acceptance it "
                    "observes (SGLang's adaptive tiers) gets these; k among them")
    uncertain: bool = Field(default=False, description="the interval of the best depth's "
                            "speedup contains 1 here: measure before relying on the range")
    target_alone_faster_from: PositiveInt | None = Field(
        default=None, description="the smallest batch of the range from which serving the "
        "target without the speculator is expected to be faster: the K's expected speedup "
        "is below 1 from there to the range's end (for K = 0: its published cost, "
        "`ResolvedSchedule.k0_cost`); None: nowhere in the range, or not modelled")


class ResolvedSchedule(Strict):
    ranges: list[ScheduledRange]
    source: str = Field(description="derived (from what) or pinned in the runbook")
    k0_cost: str | None = Field(default=None, description="what a K = 0 range costs against "
                                "the target alone on this engine, with the published "
                                "measurement, or that it is unmodelled")

    @property
    def max_k(self) -> int:
        """The largest K any range or candidate reaches: what the engine is sized for."""
        return max(max([r.k, *r.candidates]) for r in self.ranges)

    def k_at(self, batch: int) -> int:
        """K at `batch` running requests (past the last range: its K, as vLLM carries it)."""
        for r in self.ranges:
            if r.start <= batch <= r.end:
                return r.k
        return self.ranges[-1].k
