"""Generators: pure functions from analysed pairs to in-memory files.

A pair generator reads the pair's one `Analysis` (budget, latency model, staging plan,
launches, thresholds: each computed once however many generators read it) and returns
{file name: bytes} for `runbooks/<pair>/generated/`; a tree generator returns {path
relative to the repository root: bytes}. Neither touches disk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specpair.analyse.analysis import Analysis
from specpair.generate import (
    autoscaler_files,
    budget_files,
    canary_files,
    card_files,
    dashboard_files,
    launch_files,
    monitoring_files,
    pair_json,
    plan_files,
    schema_files,
)
from specpair.resolve.pair import ResolvedPair

PairGenerator = Callable[[Analysis], dict[str, bytes]]
TreeGenerator = Callable[[list[ResolvedPair]], dict[Path, bytes]]

PAIR_GENERATORS: list[PairGenerator] = [pair_json.generate, budget_files.generate,
                                       launch_files.generate, plan_files.generate,
                                       card_files.generate, monitoring_files.generate,
                                       autoscaler_files.generate, dashboard_files.generate,
                                       canary_files.generate]
TREE_GENERATORS: list[TreeGenerator] = [schema_files.generate]
