"""Runbook + lock → a fully resolved pair: both geometries, bytes, engine, GPU.

This is the one place where the author's intent meets the resolved facts. A lock that no
longer matches its runbook (another repo, path or revision) stops here: every number
downstream would otherwise describe a different checkpoint.
"""

from __future__ import annotations

from pydantic import Field, ValidationError

from specpair.bench.record import Measurement
from specpair.engines import registry
from specpair.engines.logs_model import KV_CAPACITY_KEY
from specpair.engines.pair_input import EngineInput, ResolvedArtifact
from specpair.engines.release import EngineRelease
from specpair.facts import hardware
from specpair.load.runbooks import LoadedRunbook
from specpair.load.staging_log import StagingRecord
from specpair.model.errors import Problem, SpecpairError
from specpair.model.geometry import Geometry, GeometryOverride
from specpair.model.lock import ArtifactLock, EngineVerdict, Lock, Source
from specpair.model.runbook import Artifact


class ResolvedPair(EngineInput):
    """A pair as every stage above the engines reads it: the engine input, its records,
    and the engine release it pins."""

    measurement: Measurement | None = Field(
        default=None, description="the latest record of the measurement protocol")
    staging_records: list[StagingRecord] = Field(
        default_factory=list, description="recorded cold starts, oldest first")
    engine_verdict: EngineVerdict | None = Field(
        default=None, description="the lock's answer of the release's own KV sizing")

    def logged_kv_capacity(self) -> tuple[int, str] | None:
        for record in reversed(self.staging_records):
            phase = record.phase("engine_start")
            if record.engine == self.engine and phase is not None \
                    and KV_CAPACITY_KEY in phase.detail:
                return int(phase.detail[KV_CAPACITY_KEY]), record.started_at
        return None

    @property
    def release(self) -> EngineRelease:
        """The engine release the runbook pins (the loader refused any other)."""
        return registry.by_label(self.engine)


_GEOMETRIES: dict[Geometry, Geometry] = {}
"""One object per distinct geometry value in this process (a few: one per model and
override). Pairs that serve one model (a catalogue's deployments of it) load their own
equal geometries; the value memos (`specpair.model.memo`) key on them, and a key holding an
equal but different object is compared field by field (pydantic's `==`), which was 4% of
a site build, where the same object compares by identity first. Geometries are frozen, so
an equal one stands for another wherever it is read."""


FLOAT32 = ("float32", "fp32", "float")


def served(geometry: Geometry) -> Geometry:
    """The checkpoint's geometry as `--dtype auto` serves it. Every supported release
    serves a float32 checkpoint in 16 bits (vLLM config/model.py `_resolve_auto_dtype`:
    "Downcast for float32 models", to the platform's preferred dtype; SGLang
    configs/model_config.py `_get_and_verify_dtype`: bfloat16 for Gemma, float16
    otherwise), so its KV and state take 2 bytes an element; the KV oracle holds it."""
    if geometry.dtype.lower() in FLOAT32:
        return geometry.model_copy(update={"dtype": "bfloat16"})
    return geometry


def _interned(geometry: Geometry) -> Geometry:
    return _GEOMETRIES.setdefault(geometry, geometry)


def _artifact(role: str, locked: ArtifactLock, override: GeometryOverride,
              bundled: bool = False, served_dtype: str = "auto") -> ResolvedArtifact:
    if served_dtype != "auto" and override.dtype is None:
        # the engine serves (and sizes `auto` KV) in the dtype the runbook asks for
        override = override.model_copy(update={"dtype": served_dtype})
    overridden = sorted(override.model_dump(exclude_none=True))
    geometry = override.apply(locked.geometry)
    if override.dtype is None:
        geometry = served(geometry)
    return ResolvedArtifact(
        role=role, source=locked.source, bundled=bundled, provenance=locked.provenance,
        geometry=_interned(geometry), weights=locked.weights,
        download_bytes=0 if bundled else locked.download_bytes, tokenizer=locked.tokenizer,
        unconfirmed=locked.unconfirmed, overridden=overridden, sources=locked.sources)


def _reason(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        return "impossible geometry: " + "; ".join(
            str(e["msg"]).removeprefix("Value error, ") for e in exc.errors(include_url=False))
    return str(exc)


def _mismatch(spec: Artifact, source: Source) -> list[str]:
    wrong = []
    for key in ("repo", "path", "revision"):
        if getattr(spec, key) != getattr(source, key):
            wrong.append(f"{key}: runbook {getattr(spec, key)!r}, lock {getattr(source, key)!r}")
    return wrong


def resolve(loaded: LoadedRunbook, lock: Lock, lock_display: str,
            runbook_display: str | None = None,
            measurement: Measurement | None = None,
            staging_records: list[StagingRecord] | None = None) -> ResolvedPair:
    rb = loaded.runbook
    doc = loaded.document
    display = runbook_display or str(doc.path)
    problems: list[Problem] = []
    hint = "run `specpair lock --refresh` to resolve the lock again"
    for key, spec in (("target", rb.target),):
        for wrong in _mismatch(spec, lock.target.source):
            problems.append(Problem(doc.location((key,), display),
                                    f"the lock is stale: {wrong}", hint))
    draft: ResolvedArtifact | None = None
    if rb.draft is not None:
        if lock.draft is None:
            problems.append(Problem(doc.location(("draft",), display),
                                    f"{lock_display} has no draft section", hint))
        else:
            expected = rb.target if rb.draft.bundled else rb.draft
            for wrong in _mismatch(expected, lock.draft.source):
                problems.append(Problem(doc.location(("draft",), display),
                                        f"the lock is stale (draft): {wrong}", hint))
            try:
                draft = _artifact("draft", lock.draft, rb.geometry.draft, rb.draft.bundled,
                                  rb.draft.dtype.value)
            except ValueError as exc:  # an override that makes the geometry impossible
                problems.append(Problem(doc.location(("geometry", "draft"), display),
                                        _reason(exc), "fix the override"))
    if lock.pair != rb.pair.name:
        problems.append(Problem(doc.location(("pair", "name"), display),
                                f"{lock_display} belongs to pair {lock.pair!r}", hint))
    try:
        target = _artifact("target", lock.target, rb.geometry.target,
                           served_dtype=rb.target.dtype.value)
    except ValueError as exc:  # an override that makes the geometry impossible
        raise SpecpairError([Problem(doc.location(("geometry", "target"), display),
                                     _reason(exc), "fix the override")]) from None
    if problems:
        raise SpecpairError(problems)
    pair = ResolvedPair(name=rb.pair.name, source_file=display, runbook=rb,
                        engine=f"{rb.engine.name.value} {rb.engine.version}",
                        gpu=hardware.display_key(rb.deployment.gpu), target=target, draft=draft,
                        measurement=measurement, staging_records=staging_records or [],
                        vocab_mapping=lock.vocab_mapping, engine_verdict=lock.engine_verdict)
    pair._document = doc
    return pair
