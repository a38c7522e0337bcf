"""The gate: what every check reads (`Context`), the registry of checks by catalogue
id, running the rules that apply to a pair, and which findings fail.

The checks themselves live in the rule groups beside this module (`artifacts`,
`vocabulary`, `codesign`, `deployment`, `memory`, `slo`, `startup`); the package imports
them all, so every check is registered before `run` is called.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from specpair.analyse.budget import compute
from specpair.analyse.latency import LatencyModel, SloCheck, model
from specpair.analyse.launch import build_for
from specpair.analyse.staging import StagingPlan, plan
from specpair.analyse.step_inputs import unmodelled
from specpair.engines.launch_model import Preflight
from specpair.model.budget import Budget
from specpair.model.catalogue import BY_ID, CATALOGUE, RuleSpec, unwaivable
from specpair.model.errors import SpecpairError
from specpair.model.findings import Finding
from specpair.model.memo import value_memo
from specpair.resolve.pair import ResolvedPair


@dataclass
class Context:
    pair: ResolvedPair
    budget: Budget | None = None
    latency: LatencyModel | None = None
    slo: SloCheck | None = None
    """What SP701 reads of `latency`, where the caller (the planner, per candidate) gives
    only that; `latency` wins when both are set."""
    staging: StagingPlan | None = None
    drift: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)  # rules with findings, for SP001
    speculate: bool = True
    """False: judge the server without its draft (the planner's baseline candidates), by
    the catalogue's `baseline` rules only."""
    _preflight: dict[bool, list[Preflight]] = field(default_factory=dict, repr=False)

    def preflight(self, speculate: bool) -> list[Preflight]:
        """The release's own launch checks, rendered once per gate run (SP901 and SP902
        read the same launch; the planner runs the gate for hundreds of candidates)."""
        if speculate not in self._preflight:
            self._preflight[speculate] = build_for(self.pair, speculate=speculate).preflight
        return self._preflight[speculate]


Check = Callable[[Context], Iterator[tuple[str, str, str]]]  # message, field, hint


RULES = CATALOGUE
"""What each rule is (catalogue.py); `_CHECKS` holds how each is found."""

_CHECKS: dict[str, Check] = {}


def rule(id: str) -> Callable[[Check], Check]:
    """Registers the check of catalogue rule `id`."""
    assert id in BY_ID and id not in _CHECKS, id

    def register(fn: Check) -> Check:
        _CHECKS[id] = fn
        return fn
    return register


def unregistered() -> list[str]:
    """Catalogue rules without a check (the package asserts there are none)."""
    return sorted(set(BY_ID) - set(_CHECKS))


@rule("SP001")
def _unused_waivers(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for i, waiver in enumerate(ctx.pair.runbook.waivers):
        if waiver.rule not in ctx.fired:
            yield (f"the waiver for {waiver.rule} waives nothing: the rule has no finding "
                   "on this pair", f"waivers.{i}.rule", "remove the waiver")


# --------------------------------------------------------------------------- running


@value_memo  # of the release's capabilities and the mode: the planner runs the gate per
# candidate, over the same rules each time
def _applicable(capabilities: frozenset[str], speculate: bool) -> tuple[RuleSpec, ...]:
    """The rules `run` checks, in catalogue order (SP001 comes last: it reads which rules
    fired)."""
    return tuple(r for r in RULES if r.applies_to(capabilities) and (speculate or r.baseline))


def run(ctx: Context) -> list[Finding]:
    """The findings of every rule that applies to the pair's engine release (with
    `ctx.speculate` False: of the baseline rules, judging the server without its draft)."""
    rb = ctx.pair.runbook
    blocking = unwaivable()
    # validate refuses these waivers; a pair built in memory must not get them either
    waivers = {w.rule: w.reason for w in rb.waivers if w.rule not in blocking}
    if ctx.budget is None and not ctx.problems:
        try:
            ctx.budget = compute(ctx.pair)
            if unmodelled(ctx.pair) is None:  # else SP703 names the refusal
                ctx.latency = model(ctx.pair, ctx.budget)
        except SpecpairError:
            ctx.budget = None  # SP501 reports why
    if ctx.staging is None and ctx.speculate:
        ctx.staging = plan(ctx.pair)
    findings = []
    ctx.fired = set()
    for r in _applicable(ctx.pair.release.profile.capabilities, ctx.speculate):
        for message, field_path, hint in _CHECKS[r.id](ctx):
            ctx.fired.add(r.id)
            findings.append(Finding(r.id, r.severity, message, field_path, hint,
                                    waivers.get(r.id)))
    return findings


def failing(findings: list[Finding], strict: bool = False) -> list[Finding]:
    levels = ("error", "warning") if strict else ("error",)
    return [f for f in findings if f.severity in levels and f.waived is None]

