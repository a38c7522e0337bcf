"""The analysis of one resolved pair: every number the outputs show, computed once.

load → resolve → **analyse** → generate → write. The build, the site and impact make one
`Analysis` per pair and every generator reads from it: the budget, the latency model
(refitted from the pair's bench record where it has one), the staging plan, the launch
commands, the alert thresholds, the gate's findings and (for the site) the plan search.

Each part is computed on first use and then kept, so a reader that needs only the budget
does not pay for the plan search, and an error (a budget the engine refuses, a launch the
runbook cannot express) is raised where it is first needed, located as before. Nothing
here caches by object identity: the analysis lives as long as the pair it was made for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from specpair.analyse import alerts, capacity
from specpair.analyse.budget import compute, rescheduled
from specpair.analyse.checks.gate import Context, run
from specpair.analyse.latency import LatencyModel, model
from specpair.analyse.launch import Launch, build_for
from specpair.analyse.schedule import (
    ScheduleReport,
    report,
    resolve,
    resolve_by_release,
    static_variant,
)
from specpair.analyse.staging import StagingPlan, plan
from specpair.analyse.step_inputs import not_modelled_text, unmodelled
from specpair.engines import registry as engines
from specpair.model.budget import Budget
from specpair.model.errors import Problem, SpecpairError
from specpair.model.findings import Finding
from specpair.model.step_refusals import NotModelled
from specpair.resolve.pair import ResolvedPair

if TYPE_CHECKING:  # the planner is imported when the site first asks for a plan
    from specpair.analyse.plan.results import Plan


@dataclass(frozen=True)
class Launches:
    """The launch of the runbook's release and of the newest release of every other engine
    (`engines.registry.rendered_for`), and the runbook engine's launch without speculation
    (the baseline); under a speculation schedule also the same pair at the schedule's
    largest K without it (`schedule.static_variant`: what `specpair bench` compares with).
    """

    by_engine: dict[str, Launch]
    baseline: Launch
    static: Launch | None = None
    static_k: int | None = None


class Analysis:
    def __init__(self, pair: ResolvedPair) -> None:
        self.pair, self._unscheduled_budget = _scheduled(pair)

    @cached_property
    def budget(self) -> Budget:
        if self._unscheduled_budget is not None:  # the derivation budgeted the pair once
            return rescheduled(self._unscheduled_budget, self.pair)
        return compute(self.pair)

    @cached_property
    def refusal(self) -> NotModelled | None:
        """Why the latency model does not represent this deployment, or None where it does
        (`step_inputs.unmodelled`). Where set, `latency` raises the refusal located and the
        generators write "not modelled: …" (`not_modelled`) where its numbers would be."""
        return unmodelled(self.pair)

    @cached_property
    def not_modelled(self) -> str | None:
        """The refusal's text for the outputs (`step_inputs.not_modelled_text`), or None."""
        return None if self.refusal is None else not_modelled_text(self.refusal)

    @cached_property
    def latency(self) -> LatencyModel:
        return model(self.pair, self.budget)

    @cached_property
    def modelled(self) -> LatencyModel | None:
        """The latency model, or None where the deployment is not modelled (`refusal`)."""
        return None if self.refusal is not None else self.latency

    @cached_property
    def schedule(self) -> ScheduleReport:
        """The speculation schedule at the latency curve's concurrencies (or why none)."""
        return report(self.pair, self.budget, [p.concurrency for p in self.latency.curve])

    @cached_property
    def staging(self) -> StagingPlan:
        return plan(self.pair)

    @cached_property
    def launches(self) -> Launches:
        """Every engine's launch; the runbook engine's errors refuse the pair (located in
        the runbook), another engine's are shown as the reason it is not generated."""
        pair = self.pair
        by_engine = {engine: build_for(pair, engine)
                     for engine in engines.rendered_for(pair.engine)}
        errors = by_engine[pair.engine].errors
        if errors:
            raise SpecpairError([Problem(pair.location(p.field), p.message, p.hint)
                                 for p in errors])
        fixed = static_variant(pair)
        static = build_for(fixed, pair.engine) if fixed is not None else None
        if static is None or static.errors or fixed is None:
            return Launches(by_engine, build_for(pair, pair.engine, speculate=False))
        return Launches(by_engine, build_for(pair, pair.engine, speculate=False), static,
                        fixed.runbook.speculation.num_speculative_tokens)

    @cached_property
    def thresholds(self) -> alerts.Thresholds:
        return alerts.thresholds(self.pair, self.budget, self.modelled, self.staging,
                                 self.not_modelled)

    @cached_property
    def capacity_omitted(self) -> str | None:
        """Why the pair has no capacity records (`capacity.omitted`), or None."""
        return capacity.omitted(self.modelled, self.not_modelled)

    @cached_property
    def autoscaled_to(self) -> int | None:
        """The most replicas the generated autoscaler may run, or None where no autoscaler
        is generated (none set, or no capacity to scale on): then the workload's replicas
        are the manifest's."""
        auto = self.pair.runbook.deployment.autoscaling
        return None if auto is None or self.capacity is None else auto.max_replicas

    @cached_property
    def capacity(self) -> capacity.Capacity | None:
        """A replica's token capacity by acceptance length (`analyse.capacity`), or None
        where `capacity_omitted` says why not."""
        latency = self.modelled
        if latency is None or self.capacity_omitted is not None:
            return None
        return capacity.compute(self.pair, self.budget, latency)

    @cached_property
    def findings(self) -> list[Finding]:
        """The gate's findings over this analysis's budget, model and staging plan (a
        budget the engine refuses is the gate's SP501, not an error here; a deployment
        the latency model does not represent is checked without it, `checks` names that)."""
        try:
            budget: Budget | None = self.budget
        except SpecpairError:
            budget = None
        try:
            latency: LatencyModel | None = self.modelled if budget is not None else None
        except SpecpairError:
            latency = None
        return run(Context(self.pair, budget=budget, latency=latency, staging=self.staging))

    @cached_property
    def plan_search(self) -> Plan:
        """`specpair plan` with the runbook's own GPU and concurrency (the site's Plan)."""
        from specpair.analyse.plan.search import plan as search

        return search(self.pair)


def _scheduled(pair: ResolvedPair) -> tuple[ResolvedPair, Budget | None]:
    """The pair with its speculation schedule resolved, and the budget the derivation
    computed on the way; a derivation the budget refuses is left to the part that first
    needs it (the launch), which reports it located.

    Where the lock holds the release's answer, a layout the allowlist refuses is derived
    by the release's rules alone, as `specpair verify` derived the question it recorded
    (`schedule.resolve_by_release`); `compute` then budgets the scheduled pair only where
    that answer confirms it."""
    try:
        return resolve(pair)
    except SpecpairError:
        if pair.engine_verdict is None:
            return pair, None
    try:
        return resolve_by_release(pair)[0], None
    except SpecpairError:
        return pair, None


def analyse(pairs: list[ResolvedPair]) -> list[Analysis]:
    return [Analysis(pair) for pair in pairs]
