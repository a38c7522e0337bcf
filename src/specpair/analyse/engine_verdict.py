"""The question a pair puts to its release's own KV sizing, and what the lock's recorded
answer (`specpair verify --record`) says of the budget.

A question is the release's probe (`EngineRelease.kv_probe`) for the pair with its model
folders named by role: the case the release's script reads and specpair's figures for it.
A recorded answer counts for a build only while the question is the same; a change to
anything that decides the numbers (the configs' geometry, the deployment, the release's
rules in a new specpair) asks a new question, and the answer is stale."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from specpair.engines.kv_probe import KvProbe
from specpair.model.budget import Budget
from specpair.model.errors import SpecpairError
from specpair.model.lock import EngineVerdict
from specpair.resolve.pair import ResolvedPair

ROLES = {"target": Path("/<target>"), "draft": Path("/<draft>")}
"""The model folders of a question: by role, never a machine's path."""


def local_pair(pair: ResolvedPair, folders: dict[str, Path]) -> ResolvedPair:
    """The pair as the engine reads it from the config folders: each artifact's source a
    local path (the launch then names the folder, as `--model-path`)."""
    rb = pair.runbook
    update: dict[str, Any] = {}
    for role in ("target", "draft"):
        spec = getattr(rb, role)
        if role in folders and spec is not None and not getattr(spec, "bundled", False):
            update[role] = spec.model_copy(update={"path": str(folders[role]), "repo": None,
                                                   "revision": None})
    return pair.model_copy(update={"runbook": rb.model_copy(update=update)})


def question(probe: KvProbe) -> str:
    """sha256 of what a probe asks (its release, case and specpair's figures)."""
    text = json.dumps({"release": probe.release, "case": probe.case,
                       "specpair": probe.expected}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def ask(pair: ResolvedPair, budget: Budget) -> KvProbe | None:
    """The pair's question with its folders by role; None where the release has no probe
    or the budget leaves nothing to size."""
    probe = pair.release.kv_probe
    if probe is None:
        return None
    try:
        return probe(local_pair(pair, ROLES), budget)
    except SpecpairError:
        return None


def recorded(pair: ResolvedPair, budget: Budget) -> EngineVerdict | None:
    """The lock's answer where it answers this pair's question as it stands, else None."""
    verdict = pair.engine_verdict
    if verdict is None or verdict.release != pair.engine:
        return None
    asked = ask(pair, budget)
    return verdict if asked is not None and question(asked) == verdict.question else None
