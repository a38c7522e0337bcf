"""The shape of a two-model memory budget, shared by every engine's calculator.

Every number is per GPU rank and in bytes (ints); renderers convert to GiB and say so.
Each `Line` names the rule it follows and the engine release, so a reviewer can trace
any figure back to that release's code (the file and function each engine package names).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from specpair.model.common import Strict
from specpair.model.memo import value_memo

GiB = 1 << 30
MiB = 1 << 20


class Line(Strict):
    key: str
    label: str
    value: float | int | str
    unit: str = Field(description="B, tokens, requests, slots, fraction or empty")
    rule: str = Field(description="the formula, and where the engine applies it")


line = value_memo(Line)
"""`Line(...)` memoised (`specpair.model.memo`): a plan budgets hundreds of variants per pair and
most of their lines (weights, bytes per block, cells) repeat, equal to the letter; a line
is frozen, so equal ones can be one object."""


class Assumption(Strict):
    key: str
    label: str
    value: float | int
    unit: str
    source: str = Field(description="default per GPU model, or declared in the runbook")


assumption = value_memo(Assumption)
"""`Assumption(...)` memoised, as `line` is: every budget of a plan states the same few."""


class Scenario(Strict):
    name: str
    cell_target: int = Field(description="target KV bytes per token per rank")
    cell_draft: int = Field(description="draft KV bytes per token per rank, as budgeted")
    kv_budget_bytes: int = Field(description="bytes the token pools are sized from")
    state_pool_bytes: int = 0
    state_slots: int | None = None
    max_total_tokens: int
    cell_swa: int = Field(default=0, description="sliding-layer KV bytes per SWA-pool token "
                                                 "(hybrid-SWA pools only)")
    swa_tokens: int | None = Field(default=None, description="tokens of the SWA pool, when "
                                                             "the engine splits one off")
    max_running_requests: int
    sequences_at_context: int = Field(description="full-context sequences the pool holds")
    target_kv_bytes: int
    draft_kv_bytes: int
    full_context_headroom_bytes: int = Field(
        description="KV bytes left when max_running_requests sequences all reach the "
                    "context length (negative: they cannot all do so at once)")
    fits: bool
    verdict: str
    lines: list[Line]

    @property
    def cell_total(self) -> int:
        return self.cell_target + self.cell_draft

    @property
    def capacity_estimate(self) -> str | None:
        """The interval of a capacity the engine measures at start-up (its line
        `capacity_interval`), None where the capacity is the engine's by its own rules:
        a renderer prints such a capacity as an estimate, never as an exact figure."""
        found = next((x for x in self.lines if x.key == "capacity_interval"), None)
        return None if found is None else str(found.value)


class Storage(Strict):
    target_download_bytes: int
    draft_download_bytes: int
    total_download_bytes: int
    disk_needed_bytes: int = Field(description="both downloads plus 10% for the hub cache's "
                                               "temporary files during download")
    rule: str


class Budget(Strict):
    engine: str
    gpu: str
    per: str = "GPU rank"
    assumptions: list[Assumption]
    weights: list[Line]
    baseline: Scenario
    speculative: Scenario | None
    fallback: Scenario | None = Field(
        default=None, description="what the engine budgets if it cannot resolve the draft")
    draft_pool_note: str | None = None
    capacity_lost_pct: float | None = None
    draft_share_of_kv_pct: float | None = None
    storage: Storage
    unverified: list[str] = Field(
        default_factory=list, description="declared unverified layouts: the numbers follow "
                                          "the engine's rules but no oracle checked them")
    confirmed_by: str | None = Field(
        default=None, description="`engine <release>`: the release's own code computed "
                                  "these pools for this pair (the lock's engine verdict)")
    engine_differs: list[str] = Field(
        default_factory=list, description="figures where the release's own code differs "
                                          "from this budget (the lock's engine verdict)")

    @model_serializer(mode="wrap")
    def _without_absent_verdict(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The engine's verdict fields appear only where the lock holds its answer, so a
        budget nobody verified serialises as it did before they existed."""
        data = handler(self)
        for key in ("confirmed_by", "engine_differs"):
            if isinstance(data, dict) and not data.get(key):
                data.pop(key, None)
        return data
