"""The lock: resolved facts about both artifacts, each section with its provenance.

`runbooks/<pair>/lock.json` is written by `specpair lock` (from the hub or a local
directory) or by hand from a model card (`declared`). Declared values that no retrieved
source confirms are listed in `unconfirmed`, so every page that uses them can say so.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from specpair.model.common import NonNegativeInt, PositiveInt, Strict
from specpair.model.geometry import Geometry

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
    # None rather than False, so locks of separate checkpoints do not spell it out
    inside_target: bool | None = Field(
        default=None, description="true for a bundled draft (MTP/NEXTN layers): these tensors "
                                  "are part of the target checkpoint and of its weight_bytes, "
                                  "loaded by the draft runner, never downloaded separately")
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


# Facts a resolution (hub or local folder) can leave unread without anything being wrong:
# a checkpoint published with a shard index but fetched without its shards gives bytes,
# not parameters per dtype (only the shards' headers state them), and a checkpoint may
# ship no tokenizer files. `specpair lock` lists these as unconfirmed; every other fact a
# resolution writes it has read.
RESOLUTION_MAY_LEAVE_UNREAD = frozenset({"weights.params_by_dtype", "tokenizer"})


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


class Fallback(Strict):
    kind: Literal["unk", "eos"] = Field(description="unk_token_id, else eos_token_id")
    token_id: NonNegativeInt


class VocabMapping(Strict):
    """vLLM's Token-Level Intersection of the two vocabularies (use_heterogeneous_vocab),
    computed from both tokenizers as the engine computes it (specpair.lock.vocab)."""

    target_vocab: PositiveInt = Field(description="target config vocab_size (the engine's "
                                                  "bound for target ids)")
    draft_vocab: PositiveInt = Field(description="draft config vocab_size")
    intersection: NonNegativeInt = Field(description="draft ids the draft may propose")
    intersection_max: NonNegativeInt | None = Field(
        default=None, description="upper end when the count is only known as a range (tokens "
                                  "that normalise alike make the engine's count depend on its "
                                  "dictionary order, or a declared range from published shares)")
    target_markers: list[str] = Field(default_factory=list,
                                      description="word-start markers, probed on ' a'")
    draft_markers: list[str] = Field(default_factory=list)
    target_fallback: Fallback | None = Field(
        default=None, description="where unmapped draft proposals land; none: the engine "
                                  "refuses to start")
    draft_fallback: Fallback | None = None
    special_mapped: dict[str, bool] = Field(
        default_factory=dict, description="target special token → has a draft counterpart")
    target_tokenizer: str | None = Field(
        default=None, description="fingerprint of the target tokenizer files it was computed "
                                  "from (as in target.tokenizer)")
    draft_tokenizer: str | None = Field(default=None,
                                        description="fingerprint of the draft's tokenizer files")
    provenance: Provenance
    unconfirmed: list[str] = Field(
        default_factory=list, description="declared facts that no retrieved source confirms")
    sources: dict[str, str] = Field(default_factory=dict,
                                    description="fact → where it was read or derived")

    @property
    def pct_of_draft(self) -> float:
        return round(100.0 * self.intersection / self.draft_vocab, 1)

    @property
    def pct_of_target(self) -> float:
        return round(100.0 * self.intersection / self.target_vocab, 1)


class EngineVerdict(Strict):
    """What the pinned release's own code answered `specpair verify --record` for the pair:
    the figures it computed beside specpair's, for one question (the case the release's
    script was given, model folders by role, and specpair's figures for it). A build whose
    question is the same uses it; any change to what decides the numbers asks anew."""

    release: str = Field(description="the release whose code answered, e.g. `vllm 0.34.0`")
    provenance: str = Field(description="`engine <release>`: the numbers' source")
    question: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] = Field(
        description="sha256 of the case and specpair's figures")
    figures: dict[str, int | float | str | list[int] | None] = Field(
        description="the engine's figure per compared key")
    specpair: dict[str, int | float | str | list[int] | None] = Field(
        description="specpair's figure per compared key, as the question asked")
    labels: dict[str, str] = Field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        return self.figures == self.specpair

    @property
    def differences(self) -> list[str]:
        return [f"{self.labels.get(k, k)}: specpair {self.specpair.get(k)}, engine {v}"
                for k, v in self.figures.items() if self.specpair.get(k) != v]


class Lock(Strict):
    lock_version: PositiveInt = LOCK_VERSION
    pair: str
    target: ArtifactLock
    draft: ArtifactLock | None = Field(
        default=None, description="absent for NGRAM; for a bundled draft, source = target's")
    vocab_mapping: VocabMapping | None = Field(
        default=None, description="only for vLLM's heterogeneous-vocabulary mode")
    engine_verdict: EngineVerdict | None = Field(
        default=None, description="the pinned release's own KV sizing for the pair "
                                  "(`specpair verify --record`)")

    @model_validator(mode="after")
    def _version(self) -> Lock:
        if self.lock_version != LOCK_VERSION:
            raise ValueError(f"lock_version {self.lock_version} is not supported "
                             f"(this specpair reads version {LOCK_VERSION}); re-run specpair lock")
        inside = self.draft.weights if self.draft is not None else None
        if inside is not None and inside.inside_target and \
                inside.weight_bytes > self.target.weights.weight_bytes:
            raise ValueError(f"the draft's weights ({inside.weight_bytes} B) are inside the "
                             f"target's, yet exceed them ({self.target.weights.weight_bytes} B)")
        return self
