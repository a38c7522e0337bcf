"""`specpair lock`: turn a runbook's two artifact names into lock facts.

For each runbook: resolve the target and the draft (a bundled draft is read from the
target checkpoint), then write `lock.json` atomically, and only when every artifact of that
runbook resolved: a failure leaves the previous lock untouched. A branch that has moved
since the lock was written is drift: reported, and only followed with `--refresh`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specpair.engines import registry
from specpair.engines.release import EngineRelease
from specpair.generate.render import dump_json
from specpair.load.document import MAX_FILE_BYTES
from specpair.load.runbooks import LOCK_NAME, LoadedRunbook, load_lock
from specpair.lock.hub import (
    TOKENIZER_FILES,
    Checkpoint,
    LocalCheckpoint,
    bundled_draft,
    resolve_checkpoint,
)
from specpair.lock.vocab import intersect, load_tokenizer, to_lock
from specpair.model.errors import Problem, SpecpairError
from specpair.model.lock import ArtifactLock, EngineVerdict, Lock, VocabMapping
from specpair.model.runbook import Artifact, Runbook
from specpair.write.writer import holds, write_readable

MAX_PARALLEL = 4


@dataclass
class LockOutcome:
    runbook: LoadedRunbook
    lock: Lock | None = None
    written: bool = False
    drift: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def offline_requested(flag: bool) -> bool:
    return flag or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes")


def checkpoint_of(art: Artifact, offline: bool) -> Checkpoint:
    """The artifact's checkpoint: its local folder, else its hub repo (never offline)."""
    if art.path is not None:
        return LocalCheckpoint(Path(art.path), art.path)
    if offline:
        raise SpecpairError.single(
            f"hub:{art.repo}", "offline: the hub cannot be asked for this artifact",
            "run without --offline / HF_HUB_OFFLINE, or keep the existing lock")
    from specpair.lock.hub_remote import HubCheckpoint  # imported only when the hub is used

    return HubCheckpoint(art.repo or "", art.revision or "main")


def _same_source(art: Artifact, locked: ArtifactLock | None) -> bool:
    return locked is not None and (locked.source.repo, locked.source.path,
                                   locked.source.revision) == (art.repo, art.path, art.revision)


def _release(rb: Runbook) -> EngineRelease:
    release = registry.get_release(rb.engine.name.value, rb.engine.version)
    assert release is not None, "rules.check_runbook refuses an unsupported release"
    return release


def lock_one(loaded: LoadedRunbook, *, refresh: bool, offline: bool) -> LockOutcome:
    rb = loaded.runbook
    outcome = LockOutcome(loaded)
    existing: Lock | None = None
    if (loaded.folder / LOCK_NAME).exists():
        try:
            existing, _ = load_lock(loaded.folder)
        except SpecpairError:
            existing = None  # an unreadable lock is simply replaced
    try:
        target, headers = _resolve(rb.target, existing.target if existing else None,
                                   offline, refresh, outcome, "target")
        draft = None
        if rb.draft is not None:
            if rb.draft.bundled:
                if headers is None:  # target kept from the previous lock
                    draft = existing.draft if existing else None
                    if draft is None:
                        raise SpecpairError.single(
                            loaded.document.path, "the bundled draft cannot be resolved "
                            "offline without a previous lock", "run specpair lock online")
                elif not headers:
                    raise SpecpairError.single(
                        loaded.document.path, "the bundled draft's weights are read from "
                        "the target's safetensors headers; the checkpoint has only its index",
                        "lock with the shards present, or write a declared lock: "
                        "`specpair lock --declare`")
                else:
                    draft = bundled_draft(target, headers, _release(rb).draft_mode)
            else:
                draft, _ = _resolve(rb.draft, existing.draft if existing else None,
                                    offline, refresh, outcome, "draft")
        mapping = None
        if rb.speculation.heterogeneous_vocab and rb.draft is not None and \
                not rb.draft.bundled and draft is not None:
            mapping = _vocab_mapping(rb.target, rb.draft, target, draft, existing, offline)
        # the engine's answer is kept: it counts only while its question is the pair's
        # (`analyse.engine_verdict`), so a lock that moved the facts makes it stale by itself
        outcome.lock = Lock(pair=rb.pair.name, target=target, draft=draft,
                            vocab_mapping=mapping,
                            engine_verdict=existing.engine_verdict if existing else None)
    except SpecpairError as exc:
        outcome.problems = exc.problems
    return outcome


def _vocab_mapping(target_art: Artifact, draft_art: Artifact, target: ArtifactLock,
                   draft: ArtifactLock, existing: Lock | None, offline: bool
                   ) -> VocabMapping:
    """Both tokenizers read again (small files) and intersected as vLLM does it."""
    if offline and (target_art.path is None or draft_art.path is None) and existing and \
            existing.vocab_mapping and _same_source(target_art, existing.target) and \
            _same_source(draft_art, existing.draft):
        return existing.vocab_mapping
    facts = []
    for art in (target_art, draft_art):
        checkpoint = checkpoint_of(art, offline)
        present = checkpoint.files()
        files = {name: checkpoint.read(name) for name in TOKENIZER_FILES if name in present}
        facts.append(load_tokenizer(files, checkpoint.where))
    found = intersect(facts[0], facts[1], target.geometry.vocab_size, draft.geometry.vocab_size)
    hub = [a.provenance for a in (draft, target) if a.provenance.startswith("hub@")]
    return to_lock(found, hub[0] if hub else "local").model_copy(update={
        "target_tokenizer": target.tokenizer.fingerprint,
        "draft_tokenizer": draft.tokenizer.fingerprint})


def _resolve(art: Artifact, locked: ArtifactLock | None, offline: bool, refresh: bool,
             outcome: LockOutcome, role: str
             ) -> tuple[ArtifactLock, dict[str, dict[str, Any]] | None]:
    if art.path is None and offline:
        if locked is not None and _same_source(art, locked):
            return locked, None
        checkpoint_of(art, offline)  # raises the offline error
    checkpoint = checkpoint_of(art, offline)
    resolved, headers = resolve_checkpoint(checkpoint, draft=role == "draft")
    if locked is not None and _same_source(art, locked) and locked.source.commit and \
            resolved.source.commit and locked.source.commit != resolved.source.commit:
        outcome.drift.append(f"{role}: {art.repo}@{art.revision} moved from "
                             f"{locked.source.commit[:12]} to {resolved.source.commit[:12]}")
        if not refresh:
            return locked, None
    return resolved, headers


def lock_all(runbooks: list[LoadedRunbook], *, refresh: bool = False, offline: bool = False,
             progress: Callable[[str], None] | None = None) -> list[LockOutcome]:
    offline = offline_requested(offline)
    say = progress or (lambda text: print(text, file=sys.stderr))
    total = len(runbooks)
    outcomes: list[LockOutcome] = []
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL) as pool:
        futures = [pool.submit(lock_one, rb, refresh=refresh, offline=offline)
                   for rb in runbooks]
        for done, future in enumerate(futures, start=1):
            outcome = future.result()
            status = ("failed" if outcome.problems else
                      "drift" if outcome.drift and not refresh else "resolved")
            if total > 1:
                say(f"[{done}/{total}] {outcome.runbook.name}: {status}")
            outcomes.append(outcome)
    for outcome in outcomes:
        if outcome.lock is None:
            continue
        path = outcome.runbook.folder / LOCK_NAME
        content = dump_json(outcome.lock.model_dump(mode="json", exclude_none=True))
        if not holds(path, content):  # under the file policy: no link followed
            write_readable(path, content, MAX_FILE_BYTES, "lock")
            outcome.written = True
    return outcomes


def record_verdict(folder: Path, verdict: EngineVerdict) -> bool:
    """The pair's lock with the engine's answer (`specpair verify --record`); whether the
    file changed. Everything else in the lock is kept as it is."""
    lock, _ = load_lock(folder)
    updated = lock.model_copy(update={"engine_verdict": verdict})
    path = folder / LOCK_NAME
    content = dump_json(updated.model_dump(mode="json", exclude_none=True))
    if holds(path, content):
        return False
    write_readable(path, content, MAX_FILE_BYTES, "lock")
    return True
