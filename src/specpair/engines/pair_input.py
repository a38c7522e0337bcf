"""What an engine release reads of a pair: the runbook, the two resolved artifacts, the
GPU and the schedule. It sits below the releases, so that their functions take it
instead of the resolved pair, which sits above the engine registry; a resolved pair is
an engine input with what the releases never read (records, the release object itself).
"""

from __future__ import annotations

from typing import Protocol

from pydantic import Field, PrivateAttr

from specpair.engines.schedule_model import ResolvedSchedule
from specpair.facts import hardware
from specpair.model.common import Strict
from specpair.model.errors import Location
from specpair.model.findings import path_key
from specpair.model.geometry import Geometry
from specpair.model.lock import Source, Tokenizer, VocabMapping, Weights
from specpair.model.runbook import Runbook


class Locator(Protocol):
    """The runbook as the loader parsed it (`load.document.Document`)."""

    def locate(self, loc: tuple[str | int, ...], *, key: bool = False) -> tuple[int, int]: ...


class ResolvedArtifact(Strict):
    role: str
    source: Source
    bundled: bool = False
    provenance: str
    geometry: Geometry
    weights: Weights
    download_bytes: int
    tokenizer: Tokenizer
    unconfirmed: list[str]
    overridden: list[str] = Field(description="geometry fields declared in the runbook")
    sources: dict[str, str]


class EngineInput(Strict):
    name: str
    source_file: str = Field(description="the runbook, relative to the repository root")
    runbook: Runbook
    engine: str
    gpu: str
    target: ResolvedArtifact
    draft: ResolvedArtifact | None
    vocab_mapping: VocabMapping | None = Field(
        default=None, description="the lock's vocabulary intersection (heterogeneous mode)")
    schedule: ResolvedSchedule | None = Field(
        default=None, description="the speculation schedule the launch renders "
                                  "(`specpair.analyse.schedule.attach`); None: static K")

    _document: Locator | None = PrivateAttr(default=None)
    """The runbook as the loader parsed it: positions for findings made after loading."""

    def location(self, field: str) -> Location:
        """Where a dotted field path sits in the runbook, from the document the loader
        read (a pair built in memory has none: the file alone)."""
        if self._document is None:
            return Location(self.source_file, 0, 0, field)
        line, column = self._document.locate(path_key(field))
        return Location(self.source_file, line, column, field)

    def logged_kv_capacity(self) -> tuple[int, str] | None:
        """(tokens, when) of the latest recorded start of this pair's release whose engine
        log gave its KV capacity (`specpair staging ingest --engine-log`); None where no
        record is at hand. The resolved pair, which holds the records, answers it."""
        return None

    def checkpoints(self) -> list[tuple[str, ResolvedArtifact]]:
        """(role, artifact) of each checkpoint the engine loads: the target, and a draft
        of its own (a bundled draft's layers are the target checkpoint's)."""
        found = [("target", self.target)]
        if self.draft is not None and not self.draft.bundled:
            found.append(("draft", self.draft))
        return found

    @property
    def bundled_draft(self) -> ResolvedArtifact | None:
        return self.draft if self.draft is not None and self.draft.bundled else None

    @property
    def target_own_weight_bytes(self) -> int:
        """Weights the target runner loads: a bundled draft's tensors sit in the same
        checkpoint but are loaded (and counted) by the draft runner."""
        bundled = self.bundled_draft
        return self.target.weights.weight_bytes - (bundled.weights.weight_bytes
                                                   if bundled else 0)

    @property
    def target_own_active_params(self) -> int:
        def active(art: ResolvedArtifact) -> int:
            return art.weights.active_params or art.weights.total_params
        bundled = self.bundled_draft
        return active(self.target) - (active(bundled) if bundled else 0)

    @property
    def gpu_spec(self) -> hardware.GPU:
        return hardware.resolve(self.runbook.deployment.gpu)
