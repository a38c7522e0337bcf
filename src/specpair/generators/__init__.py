"""Generators: pure functions from resolved pairs to in-memory files.

A pair generator returns {file name: bytes} for `runbooks/<pair>/generated/`; a tree
generator returns {path relative to the repository root: bytes}. Neither touches disk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specpair.generators import (
    budget_files,
    card_files,
    dashboard_files,
    launch_files,
    monitoring_files,
    pair_json,
    plan_files,
    schema_files,
)
from specpair.resolve import ResolvedPair

PairGenerator = Callable[[ResolvedPair], dict[str, bytes]]
TreeGenerator = Callable[[list[ResolvedPair]], dict[Path, bytes]]

PAIR_GENERATORS: list[PairGenerator] = [pair_json.generate, budget_files.generate,
                                       launch_files.generate, plan_files.generate,
                                       card_files.generate, monitoring_files.generate,
                                       dashboard_files.generate]
TREE_GENERATORS: list[TreeGenerator] = [schema_files.generate]
