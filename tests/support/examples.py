"""The repository's example pairs, loaded by name."""

from __future__ import annotations

from specpair.commands.build import load_pairs
from specpair.resolve.pair import ResolvedPair
from tests.support.paths import REPO


def example(name: str) -> ResolvedPair:
    folder = REPO / "runbooks" / name
    (path,) = [p for p in folder.iterdir() if p.name.startswith("runbook.")]
    (pair,) = load_pairs(REPO, [path])
    return pair
