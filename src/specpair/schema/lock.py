"""The lock: resolved facts about both artifacts, each section with its provenance.

`runbooks/<pair>/lock.json` is written by `specpair lock` (from the hub or a local
directory) or by hand from a model card (`declared`). Declared values that no retrieved
source confirms are listed in `unconfirmed`, so every page that uses them can say so.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints, model_validator

from specpair.geometry import Geometry
from specpair.schema.common import NonNegativeInt, PositiveInt, Strict

LOCK_VERSION = 1

Provenance = Annotated[str, StringConstraints(pattern=r"^(hub@[0-9a-f]{40}|local|declared)$")]


class Source(Strict):
    repo: str | None = None
    path: str | None = None
    revision: str | None = Field(default=None, description="revision as the runbook asked")
    commit: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")] | None = Field(
        default=None, description="the commit the revision resolved to")


class Weights(Strict):
    params_by_dtype: dict[str, NonNegativeInt] = Field(
        description="parameter count per safetensors dtype (e.g. BF16, F8_E4M3)")
    weight_bytes: NonNegativeInt = Field(description="bytes of all tensors in the checkpoint")
    replicated_bytes: NonNegativeInt = Field(
        default=0, description="bytes of tensors every tensor-parallel rank holds whole "
                               "(norms, DSpark fc and Markov head); the rest is sharded")
    active_params: NonNegativeInt | None = Field(
        default=None, description="parameters one token uses (MoE: shared + top-k experts); "
                                  "unset = all (dense)")
    provenance: Provenance

    @property
    def total_params(self) -> int:
        return sum(self.params_by_dtype.values())

    @property
    def active_fraction(self) -> float:
        total = self.total_params
        return 1.0 if not total or self.active_params is None else min(
            1.0, self.active_params / total)


class Tokenizer(Strict):
    fingerprint: Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")] | None = (
        Field(default=None, description="sha256 over the tokenizer files, sorted by name"))
    vocab_size: PositiveInt
    files: list[str] = Field(default_factory=list)
    provenance: Provenance


class ArtifactLock(Strict):
    source: Source
    provenance: Provenance = Field(description="where the geometry came from")
    geometry: Geometry
    weights: Weights
    download_bytes: NonNegativeInt = Field(description="bytes of all files a download fetches")
    tokenizer: Tokenizer
    unconfirmed: list[str] = Field(
        default_factory=list, description="declared facts that no retrieved source confirms")
    sources: dict[str, str] = Field(default_factory=dict,
                                    description="fact → where it was read or derived")


class Lock(Strict):
    lock_version: PositiveInt = LOCK_VERSION
    pair: str
    target: ArtifactLock
    draft: ArtifactLock | None = Field(
        default=None, description="absent for NGRAM; for a bundled draft, source = target's")

    @model_validator(mode="after")
    def _version(self) -> Lock:
        if self.lock_version != LOCK_VERSION:
            raise ValueError(f"lock_version {self.lock_version} is not supported "
                             f"(this specpair reads version {LOCK_VERSION}); re-run specpair lock")
        return self
