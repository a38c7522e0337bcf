"""The interface of one engine release: what a package under `specpair/engines/` provides.

A release is known by (engine name, exact version). Its package holds everything specpair
knows about it, read from that release's own code (its wheel's files, named where each
fact is used); nothing outside the engine packages branches on an engine name or version.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specpair.engines.pair_input import EngineInput
from specpair.engines.profile import EngineProfile

if TYPE_CHECKING:  # annotations only: the release packages import these, not the interface
    from specpair.engines.args_model import ResolvedArgs
    from specpair.engines.bench_model import BenchProbe
    from specpair.engines.kv_probe import KvProbe
    from specpair.engines.launch_model import Launch
    from specpair.engines.logs_model import Timing
    from specpair.engines.metrics_model import EngineMetrics
    from specpair.engines.reviewed import ReleaseFact
    from specpair.facts.hardware import GPU
    from specpair.model.budget import Budget
    from specpair.model.geometry import Geometry

__all__ = ["EngineProfile", "EngineRelease", "as_configured"]


def as_configured(target: Geometry) -> Geometry:
    """A release that overrides nothing of the target's config in draft mode."""
    return target


@dataclass(frozen=True)
class EngineRelease:
    """One supported release; registered once in `specpair.engines.registry.RELEASES`."""

    profile: EngineProfile
    server_args: Callable[[EngineInput, GPU], ResolvedArgs]
    """The server arguments of a pair, resolved once with the release's defaults: what
    the launch renders and the budget reads."""
    launch: Callable[[EngineInput, bool], Launch]
    """The server command of a pair (`speculate=False`: the same server without a draft)."""
    budget: Callable[[EngineInput, GPU], Budget]
    """The two-model memory budget, through this release's start-up order and formulas."""
    metrics: EngineMetrics
    """What the release exports on /metrics; the rules and dashboards use nothing else."""
    image: str
    """The release's published container image."""
    log_timings: tuple[Timing, ...]
    """Start-up log lines that time a part of the start (weight load, graph capture)."""
    bench: BenchProbe
    """Request fields and server checks of the measurement protocol."""
    draft_mode: Callable[[Geometry], Geometry] = as_configured
    """The target's geometry as the release reads the target's config for a draft that
    lives in the target checkpoint (built-in MTP layers): the overrides the release's own
    draft-mode config code applies, e.g. a layer count the config leaves out. `specpair
    lock` builds the bundled draft from it; `specpair.model.geometry` reads configs as written."""
    recap: Callable[[Budget, EngineInput, GPU], Budget | None] | None = None
    """`budget(pair, gpu)` from the budget of a pair that differs from `pair` in
    deployment.max_running_requests (and deployment.concurrency) alone, computing again
    only what those decide (the planner budgets each candidate without and then with the
    concurrency it chose); None from the callable, or unset: not derivable that way,
    `budget` computes it whole."""
    reschedule: Callable[[Budget, EngineInput, GPU], Budget | None] | None = None
    """`budget(pair, gpu)` from `computed`, the budget of the same pair before its
    speculation schedule was resolved (the derivation budgets the pair first to find the
    schedule): only what the schedule decides is computed again; None from the callable,
    or unset: `budget` computes it whole."""
    schedule_refusal: Callable[[EngineInput], str | None] | None = None
    """Why the release cannot run a speculation schedule for a pair, citing its code
    (None from the callable: it can); unset: the release's schedule support is unreviewed."""
    log_kv_capacity: re.Pattern[str] | None = None
    """The start-up log line in which the release reports its KV capacity in tokens (group
    1, digits with thousands separators); None: not read from its log."""
    differences: tuple[ReleaseFact, ...] = ()
    """The reviewed facts that separate it from `compared_with` (its `facts.DIFFERENCES`),
    which the upgrade checklist between the two lists; empty: none recorded."""
    compared_with: str | None = None
    """The release label `differences` were read against."""
    kv_probe: Callable[[EngineInput, Budget], KvProbe] | None = None
    """The question `specpair verify` puts to the release's own KV sizing code for a pair
    and its budget (`specpair.engines.kv_probe`); None: the release has none."""

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def version(self) -> str:
        return self.profile.version

    @property
    def label(self) -> str:
        return self.profile.label

    def schedule_refusal_for(self, pair: EngineInput) -> str | None:
        """Why this release will not run a schedule for the pair (None: it will): the
        release's own reviewed reason, or, where its schedule support is unreviewed, that.
        The one answer the launch, the break-even page and the planner all use."""
        if self.schedule_refusal is None:
            return f"specpair has not reviewed {self.label}'s schedule support"
        return self.schedule_refusal(pair)
