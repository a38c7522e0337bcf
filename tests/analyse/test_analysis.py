"""One analysis per pair: a build and a site compute each pair's budget, latency model
(refitted from its bench record where it has one), staging plan and launches once, however
many generators, alert rules, dashboards and pages read them."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from specpair.analyse import budget, latency, launch, staging
from specpair.commands import site
from specpair.commands.build import load_pairs, render
from specpair.engines import registry as engines
from tests.support.paths import REPO

PAIRS = load_pairs(REPO)
# the fixtures below patch the counted functions in every specpair module loaded when
# they run; the planner is imported lazily (by the site), so load it now or a test run
# alone would not see its calls
importlib.import_module("specpair.analyse.plan.search")

# the functions that compute a pair's numbers, wherever a module imported them by name
COUNTED: dict[str, Callable[..., Any]] = {
    "budget": budget.compute, "latency model": latency.model, "staging plan": staging.plan,
    "launch": launch.build_for}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[tuple[str, str]]]:
    counted: Counter[tuple[str, str]] = Counter()

    def counting(what: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(pair: Any, *args: Any, **kwargs: Any) -> Any:
            # the pair itself, not the planner's candidates (copies under the same name);
            # staging's what-ifs plan the other modes (a second argument)
            # and the copy the analysis attaches a speculation schedule to (`schedule.
            # attach`: the same runbook object, the schedule resolved)
            own = next((p.name for p in PAIRS if p is pair or (
                getattr(pair, "schedule", None) is not None and pair.runbook is p.runbook)),
                None)
            if own is not None and (what != "staging plan" or not args):
                counted[(what, own)] += 1
            return real(pair, *args, **kwargs)
        return wrapper

    for module in [m for name, m in sys.modules.items() if name.startswith("specpair")]:
        for attr, value in list(vars(module).items()):
            for what, real in COUNTED.items():
                if value is real:
                    monkeypatch.setattr(module, attr, counting(what, real))
    yield counted


def test_a_build_computes_each_pair_once(calls: Counter[tuple[str, str]]) -> None:
    pairs = PAIRS
    render(REPO, pairs)
    for pair in pairs:
        got = {what: calls[(what, pair.name)] for what in COUNTED}
        # one launch per rendered release and one baseline of the runbook's own; a pair
        # whose runbook asks for a derived schedule is budgeted once, as written (the
        # derivation's input), and its release derives the scheduled budget from that
        # (`EngineRelease.reschedule`, tests/analyse/test_reschedule.py)
        want = {"budget": 1, "latency model": 1, "staging plan": 1,
                "launch": len(engines.rendered_for(pair.engine)) + 1}
        assert got == want, pair.name


def test_a_site_page_computes_each_pair_once(calls: Counter[tuple[str, str]]) -> None:
    pairs = PAIRS[:2]
    site.render(pairs, {})
    for pair in pairs:
        got = {what: calls[(what, pair.name)] for what in COUNTED}
        # the gate's launch rules (SP6xx in analyse/checks/) still build their own launch;
        # the rule catalogue's context is where that goes next (issue 26 item 2)
        assert {k: v for k, v in got.items() if k != "launch"} == {
            "budget": 1, "latency model": 1, "staging plan": 1}, pair.name


@pytest.fixture
def budgets_by_object(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every pair object budget.compute is called with, once per call: the pairs of the
    runbooks and any copy a generator or rule makes (budget.compute memoises nothing, so
    a second call on one object would be a second computation)."""
    seen: list[Any] = []
    real = budget.compute

    def counting(pair: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(pair)  # holds the object: no id() is reused while the test runs
        return real(pair, *args, **kwargs)

    for module in [m for name, m in sys.modules.items() if name.startswith("specpair")]:
        for attr, value in list(vars(module).items()):
            if value is real:
                monkeypatch.setattr(module, attr, counting)
    yield seen


@pytest.mark.parametrize("command", ["build", "site"])
def test_no_pair_object_is_budgeted_twice(budgets_by_object: list[Any], command: str) -> None:
    pairs = PAIRS if command == "build" else PAIRS[:2]
    if command == "build":
        render(REPO, pairs)
    else:
        site.render(pairs, {})
    per_object = Counter(id(pair) for pair in budgets_by_object)
    twice = sorted({p.name for p in budgets_by_object if per_object[id(p)] > 1})
    assert budgets_by_object and not twice, twice
    # each runbook's own pair is budgeted once; other objects are the plan search's
    # candidates (the site's plan page), each a pair of its own
    assert [per_object[id(p)] for p in pairs] == [1] * len(pairs)
    if command == "build":  # a build budgets nothing but the runbooks' pairs, once each
        assert len(budgets_by_object) == len(pairs)
