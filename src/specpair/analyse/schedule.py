"""Speculation schedules: the draft length per batch-size range that maximises goodput.

A long draft pays at low load and loses at high load (the verify of K + 1 tokens per
sequence and K draft forwards grow with the batch while the acceptance per step does not).
The break-even curve (`specpair.analyse.latency`) says where one K stops paying; a schedule turns
the curves of every K into the choice an engine can run: for each batch-size range the K
whose expected speedup S_K(B) = τ(K) · T_decode(B) / T_step(K, B) is highest, and K = 0
(drafting off) where no depth beats it.

K = 0 is not the target alone: the draft stays loaded and the engine's speculative
machinery on (vLLM 0.27.1 with a schedule: +4.7–21.6% TPOT at K = 0 against the same
server without a speculative config, `data/k0_cost.yaml`). Where an engine's K = 0 cost is
published (`specpair.facts.k0_cost`), a K = 0 range costs its upper end, so a schedule turns
drafting off only where that pays across the whole published interval; a speculative range
where K = 0 would pay at the interval's lower end lists 0 among its candidates, and every
range says whether serving the target alone (no speculator) is faster there. Where no
measurement is published, K = 0 is priced as the target alone and the schedule says that
cost is unmodelled.

Inputs, all as the rest of specpair reads them: the step model of the pair's GPU family ×
engine (its own bench fit when it has one: `latency.parameters`), acceptance by depth
(`acceptance.by_depth`: the pair's per-position measurement, else its reference τ, else
its SLO), the expected context, and the deployment's limit: batches 1 to the engine's
maximum running requests, depths 0 to the runbook's num_speculative_tokens (the largest K
the engine is sized for and clamps to).

Ranges are merged where the optimum is flat within the model's interval: two neighbouring
ranges become one when one K's speedup stays inside the cross-validated interval of the
best depth's speedup at every batch of both (the model cannot tell the two schedules
apart) and within `MERGE_LOSS` of it, and that K is not slower than the target alone
anywhere in them. A K = 0 range is
never merged into a speculative one. Each range also lists the
depths the model cannot tell from its K (`candidates`), for engines that choose among
candidates by the acceptance they observe (SGLang's adaptive tiers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Literal

from pydantic import Field

from specpair.analyse.acceptance import AcceptanceCurve, by_depth, shape_depth
from specpair.analyse.budget import compute
from specpair.analyse.calibrated_params import Interval
from specpair.analyse.latency import model, parameters, setup
from specpair.analyse.step_inputs import _Setup
from specpair.analyse.step_params import StepParams
from specpair.analyse.stepmodel import memo_step_times, shape_for
from specpair.engines.schedule_model import ResolvedSchedule, ScheduledRange
from specpair.facts import k0_cost
from specpair.facts.k0_cost import K0Cost
from specpair.model.budget import Budget
from specpair.model.common import Strict
from specpair.model.memo import value_memo
from specpair.resolve.pair import ResolvedPair

DEPTH_LIMIT = 16
"""Deepest K a derived schedule considers: past 16 drafted tokens no published sweep
measures acceptance (the planner stops at 8), and a runbook's γ is otherwise unbounded."""
MERGE_LOSS = 0.05
"""A merge may cost at most 5% of the best depth's expected speedup at any batch of the
merged range (and stay within the model's interval): the published bands are ±15-60%
wide, so the interval alone would merge a K = 3 range at batch 1 into a K = 1 one at 64
and give up the low-load gain a schedule is for; each distinct K is also a CUDA-graph
capture tier of its own in vLLM (vllm/config/vllm.py), which is what merging saves."""


def grid(top: int) -> list[int]:
    """Half-octave batch sizes 1, 2, 3, 4, 6, 8, 12, … up to `top`, and `top`."""
    out = {1, top}
    b = 2
    while b <= top:
        out.update(x for x in (b, b + b // 2) if x <= top)
        b *= 2
    return sorted(out)


@dataclass(frozen=True)
class Goodput:
    """Expected speedup over the target alone of each depth at each batch (pure: every
    field is immutable, so each (depth, batch) is computed once per object; the merge and
    the candidates ask for the same ones many times)."""

    s: _Setup
    method: str
    curve: AcceptanceCurve
    depths: tuple[int, ...]    # 0 first; depths past a measured curve are left out
    band: Interval
    k0: K0Cost | None  # the engine's published K = 0 cost; None: unmodelled (free here)
    _speedups: dict[tuple[int, int], float] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _best: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def speedup(self, k: int, batch: int) -> float:
        """Expected speedup of depth `k` over the target alone at `batch`; K = 0 at the
        upper end of its published cost (1 where none is published)."""
        if k == 0:
            return 1.0 / self.k0.slowdown("high") if self.k0 else 1.0
        known = self._speedups.get((k, batch))
        if known is not None:
            return known
        tau = self.curve.tau(k)
        assert tau is not None
        shape = shape_for(self.method, k, None, None, 1, None)
        t = memo_step_times(self.s.target, self.s.draft, shape, batch, self.s.context, self.s.hw,
                       self.s.params)
        out = self._speedups[(k, batch)] = t.speedup(tau)
        return out

    def best(self, batch: int) -> int:
        """The depth of most speedup (the smaller one on a tie: it costs less)."""
        if batch not in self._best:
            self._best[batch] = max(self.depths,
                                    key=lambda k: (round(self.speedup(k, batch), 9), -k))
        return self._best[batch]

    def k0_may_pay(self, k: int, batch: int) -> bool:
        """Whether K = 0 at the lower end of its published cost beats depth `k` > 0."""
        return k > 0 and self.k0 is not None and \
            1.0 / self.k0.slowdown("low") > self.speedup(k, batch)

    def tied(self, k: int, batch: int) -> bool:
        """Whether depth `k`'s speedup lies within the interval of the best depth's."""
        best = self.speedup(self.best(batch), batch)
        return self.band.overlaps(self.speedup(k, batch), best)


def goodput(pair: ResolvedPair, budget: Budget, curve: AcceptanceCurve | None = None,
            params: StepParams | None = None) -> Goodput:
    """`curve`, `params`: the planner's, for a variant of the pair (default: the pair's
    own acceptance by depth and step-model parameters)."""
    s = setup(pair, budget, params or parameters(pair, budget).values)
    curve = curve or by_depth(pair)[0]
    ceiling = min(shape_depth(pair), DEPTH_LIMIT)
    depths = (0, *(k for k in range(1, ceiling + 1) if curve.tau(k) is not None))
    return _goodput(s, pair.runbook.speculation.method.value, curve, depths, s.speedup_band,
                    k0_cost.cost(pair.runbook.engine.name.value))


@lru_cache(maxsize=256)
def _goodput(s: _Setup, method: str, curve: AcceptanceCurve, depths: tuple[int, ...],
             band: Interval, k0: K0Cost | None) -> Goodput:
    """One `Goodput` per distinct input, keyed on its values (every one is frozen and
    compared by value): the planner's candidates that differ only in what the step model
    does not read (the memory fraction, the request cap) share one, and with it the
    speedups already computed."""
    return Goodput(s, method, curve, depths, band, k0)


def k0_slowdown(pair: ResolvedPair) -> float:
    """The factor a K = 0 step's TPOT is of the target alone's on the pair's engine: 1 + the
    upper end of its published K = 0 cost, as `Goodput.speedup` prices it (1: unmodelled)."""
    known = k0_cost.cost(pair.runbook.engine.name.value)
    return known.slowdown("high") if known else 1.0


def max_batch(budget: Budget) -> int:
    """The most requests the engine runs in one step (its max running requests)."""
    scenario = budget.speculative or budget.baseline
    return max(1, scenario.max_running_requests)


@dataclass
class _Range:
    start: int
    end: int
    k: int

    def samples(self, points: list[int]) -> list[int]:
        return sorted({self.start, self.end} | {p for p in points if self.start <= p <= self.end})


def _boundary(lo: int, hi: int, best: Callable[[int], int]) -> int:
    """Smallest batch in (lo, hi] whose best depth is best(hi) (best(lo) differs)."""
    want = best(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if best(mid) == want:
            hi = mid
        else:
            lo = mid
    return hi


def _fit(g: Goodput, k: int, batches: list[int]) -> float | None:
    """Worst ratio of depth k's speedup to the best's over `batches`; None where k falls
    outside the best depth's interval at one of them, or is slower than the target alone
    (a merge never runs a depth where it loses)."""
    worst = 1.0
    for b in batches:
        if not g.tied(k, b) or g.speedup(k, b) < 1.0:
            return None
        worst = min(worst, g.speedup(k, b) / g.speedup(g.best(b), b))
    return worst if worst >= 1 - MERGE_LOSS else None


def _merge(g: Goodput, ranges: list[_Range], points: list[int]) -> list[_Range]:
    """Merges the neighbouring speculative ranges whose optimum is flat within the
    interval, the flattest pair first, until no pair can merge."""
    while True:
        options: list[tuple[float, int, int]] = []  # (worst ratio, index, K)
        for i in range(len(ranges) - 1):
            a, b = ranges[i], ranges[i + 1]
            if a.k == 0 or b.k == 0:
                continue
            batches = sorted(set(a.samples(points)) | set(b.samples(points)))
            for k in sorted({a.k, b.k}):
                fit = _fit(g, k, batches)
                if fit is not None:
                    options.append((fit, i, k))
        if not options:
            return ranges
        _, i, k = max(options, key=lambda o: (o[0], -o[1], -o[2]))
        ranges[i:i + 2] = [_Range(ranges[i].start, ranges[i + 1].end, k)]


def derive(pair: ResolvedPair, budget: Budget | None = None,
           curve: AcceptanceCurve | None = None, params: StepParams | None = None
           ) -> ResolvedSchedule:
    """The derived schedule of a pair (see the module docstring)."""
    budget = budget or compute(pair)
    return _derived(goodput(pair, budget, curve, params), max_batch(budget),
                    "the planner" if params else parameters(pair, budget).source,
                    k0_cost.label(pair.runbook.engine.name.value, pair.runbook.engine.version))


@value_memo  # of its inputs' values (a Goodput compares by its setup, curve and depths):
# a plan's candidates that differ in the memory fraction alone derive the same schedule
def _derived(g: Goodput, top: int, step_source: str, k0_label: str) -> ResolvedSchedule:
    """`derive` once the goodput, the engine's batch limit, where the step model's
    parameters come from and what the engine's K = 0 costs are known."""
    points = grid(top)
    cache: dict[int, int] = {}

    def best(b: int) -> int:
        if b not in cache:
            cache[b] = g.best(b)
        return cache[b]

    ranges: list[_Range] = []
    for i, p in enumerate(points):
        if i == 0:
            ranges.append(_Range(1, p, best(p)))
            continue
        prev = points[i - 1]
        if best(p) == ranges[-1].k:
            ranges[-1].end = p
            continue
        edge = _boundary(prev, p, best)
        ranges[-1].end = edge - 1
        ranges.append(_Range(edge, p, best(p)))
    out = [_scheduled(g, r, r.samples(points)) for r in _merge(g, ranges, points)]
    return ResolvedSchedule(ranges=out, k0_cost=k0_label, source=(
        f"derived: the K of most expected speedup per batch range, batches 1–{top} (the "
        f"engine's max running requests), K 0–{max(g.depths)} (num_speculative_tokens); "
        f"acceptance by depth: {g.curve.source}; step model: "
        f"{step_source}; "
        f"ranges merged where the optimum is flat within the model's interval "
        f"({g.band.label})"))


def _scheduled(g: Goodput, r: _Range, batches: list[int]) -> ScheduledRange:
    """One derived range as the engines render it: its K, the depths the model cannot tell
    from it (0 among them where the speedup's interval contains 1, or where K = 0 pays at
    the lower end of its published cost), and whether the target alone is faster there."""
    candidates = [r.k] if r.k == 0 else sorted(
        {r.k} | {k for k in g.depths if k > 0 and all(g.tied(k, b) for b in batches)})
    uncertain = any(g.band.around(g.speedup(r.k, b))[0] < 1 <
                    g.band.around(g.speedup(r.k, b))[1] for b in batches if r.k)
    if uncertain or any(g.k0_may_pay(r.k, b) for b in batches):
        candidates = sorted({0, *candidates})
    return ScheduledRange(start=r.start, end=r.end, k=r.k, candidates=candidates,
                          uncertain=uncertain, target_alone_faster_from=_loses_from(g, r))


def _loses_from(g: Goodput, r: _Range) -> int | None:
    """The smallest batch of `r` from which its K is expected to be slower than the target
    alone (no speculator loaded) up to the range's end; None where it is not at the end
    (a speedup falls with the batch: the verify grows with it, the acceptance does not)."""
    if g.speedup(r.k, r.end) >= 1.0:
        return None
    lo, hi = r.start - 1, r.end  # speedup(hi) < 1; lo: at or past it, or before the range
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if g.speedup(r.k, mid) < 1.0:
            hi = mid
        else:
            lo = mid
    return hi


def pinned(pair: ResolvedPair) -> ResolvedSchedule | None:
    """The runbook's hand-pinned ranges, as written (rules.check_runbook validated them)."""
    written = pair.runbook.speculation.schedule
    if not isinstance(written, list):
        return None
    return ResolvedSchedule(
        ranges=[ScheduledRange(start=r.start, end=r.end, k=r.k, candidates=[r.k])
                for r in written],
        source="pinned in the runbook (speculation.schedule)",
        k0_cost=k0_cost.label(pair.runbook.engine.name.value, pair.runbook.engine.version))


def attach(pair: ResolvedPair, budget: Budget | None = None) -> ResolvedPair:
    """The pair with the schedule its runbook asks for resolved (unchanged without one,
    or when it is already resolved)."""
    return resolve(pair, budget)[0]


def resolve(pair: ResolvedPair, budget: Budget | None = None
            ) -> tuple[ResolvedPair, Budget | None]:
    """(`attach(pair, budget)`, the budget of the unscheduled pair where the derivation
    computed or was given one, else None): `budget.rescheduled` turns that budget into the
    scheduled pair's without computing it again."""
    written = pair.runbook.speculation.schedule
    if written is None or pair.schedule is not None:
        return pair, None
    if isinstance(written, list):
        return pair.model_copy(update={"schedule": pinned(pair)}), None
    budget = budget or compute(pair)
    return pair.model_copy(update={"schedule": derive(pair, budget)}), budget


def resolve_by_release(pair: ResolvedPair) -> tuple[ResolvedPair, Budget]:
    """`attach` by the release's budget alone, the allowlist aside, and the scheduled
    pair's budget by the same rules: how a layout the allowlist refuses is put to the
    engine (`specpair verify`), and read back once the lock holds its answer. A derived
    schedule comes from the unscheduled pair's budget, so the question is the scheduled
    pair's, the one the build budgets."""
    budget = pair.release.budget(pair, pair.gpu_spec)
    scheduled, _ = resolve(pair, budget)
    if scheduled is pair:
        return pair, budget
    return scheduled, pair.release.budget(scheduled, scheduled.gpu_spec)


@dataclass
class Comparison:
    """Speedup against concurrency of every static depth and of a schedule (the
    break-even page's plot and the planner's schedule candidates)."""

    g: Goodput
    schedule: ResolvedSchedule
    concurrencies: list[int]

    @cached_property
    def static(self) -> dict[int, list[float]]:
        return {k: [round(self.g.speedup(k, c), 4) for c in self.concurrencies]
                for k in self.g.depths if k > 0}

    @cached_property
    def scheduled(self) -> list[float]:
        return [round(self.g.speedup(min(self.schedule.k_at(c), max(self.g.depths)), c), 4)
                for c in self.concurrencies]


def compare(pair: ResolvedPair, budget: Budget, concurrencies: list[int]) -> Comparison:
    schedule = pair.schedule or derive(pair, budget)
    return Comparison(goodput(pair, budget), schedule, concurrencies)


class ScheduleReport(Strict):
    """What the outputs say about a schedule for the pair: the one it runs (or would run
    with `schedule: derived`), or why its release cannot run one."""

    requested: Literal["derived", "pinned", "static"]
    refusal: str | None = Field(description="why the engine release cannot run a schedule "
                                            "for this pair, citing its code")
    schedule: ResolvedSchedule | None
    concurrencies: list[int]
    acceptance_source: str
    static: dict[str, list[float]] = Field(description="K → expected speedup over the target "
                                                       "alone at each concurrency")
    scheduled: list[float] | None = Field(description="the schedule's expected speedup")


def report(pair: ResolvedPair, budget: Budget, concurrencies: list[int]) -> ScheduleReport:
    written = pair.runbook.speculation.schedule
    requested: Literal["derived", "pinned", "static"] = (
        "static" if written is None else "derived" if written == "derived" else "pinned")
    refusal = pair.release.schedule_refusal_for(pair)
    if refusal is not None and written is None:
        return ScheduleReport(requested=requested, refusal=refusal, schedule=None,
                              concurrencies=[], acceptance_source="", static={},
                              scheduled=None)
    c = compare(pair, budget, concurrencies)
    return ScheduleReport(requested=requested, refusal=refusal, schedule=c.schedule,
                          concurrencies=concurrencies, acceptance_source=c.g.curve.source,
                          static={str(k): v for k, v in c.static.items()},
                          scheduled=c.scheduled)


def at_depth(pair: ResolvedPair, k: int) -> ResolvedPair:
    """The pair at the static depth `k` a schedule runs somewhere, its SLO carried to that
    depth as the planner carries it (`acceptance.by_depth`)."""
    rb = pair.runbook
    _, slo_curve = by_depth(pair)
    tau_slo = slo_curve.tau(k)
    assert tau_slo is not None
    spec = rb.speculation.model_copy(update={"num_speculative_tokens": k, "schedule": None})
    slo = rb.acceptance.slo.model_copy(update={"min_length": round(tau_slo, 2)})
    acc = rb.acceptance.model_copy(update={"slo": slo})
    return pair.model_copy(update={"runbook": rb.model_copy(
        update={"speculation": spec, "acceptance": acc}), "schedule": None})


def slo_by_depth(pair: ResolvedPair) -> list[tuple[int, float]]:
    """(K, the SLO carried to K) for 0 and each K > 0 the pair's schedule runs ([] without
    one): the acceptance rules compare τ with this at the depth in use (τ(0) = 1)."""
    if pair.runbook.speculation.schedule is None or pair.schedule is None:
        return []
    _, slo_curve = by_depth(pair)
    out = [(0, 1.0)]
    for k in sorted({r.k for r in pair.schedule.ranges if r.k > 0}):
        tau = slo_curve.tau(k)
        assert tau is not None
        out.append((k, round(tau, 4)))
    return out


def break_even_by_concurrency(pair: ResolvedPair, latency_curve: list[tuple[int, float]]
                              ) -> list[tuple[int, float]]:
    """τ* at each concurrency of the curve for the K the schedule runs there (0 where it
    drafts nothing: nothing to break even); the static curve without a schedule."""
    if pair.runbook.speculation.schedule is None or pair.schedule is None:
        return latency_curve
    gamma = shape_depth(pair)
    by_k: dict[int, dict[int, float]] = {}
    out = []
    for c, even in latency_curve:
        k = pair.schedule.k_at(c)
        if k == 0:
            out.append((c, 0.0))
        elif k == gamma:
            out.append((c, even))
        else:
            if k not in by_k:
                fixed = at_depth(pair, k)
                by_k[k] = {p.concurrency: p.break_even
                           for p in model(fixed, compute(fixed)).curve}
            points = by_k[k]
            out.append((c, points.get(c, points[min(points, key=lambda x: abs(x - c))])))
    return out


def static_variant(pair: ResolvedPair) -> ResolvedPair | None:
    """The pair at its schedule's largest K as a static `num_speculative_tokens`, without
    the schedule: what `specpair bench` runs the schedule against (None without one). Its
    SLO is carried to that depth as `at_depth` carries it."""
    scheduled = attach(pair)
    if scheduled.runbook.speculation.schedule is None or scheduled.schedule is None:
        return None
    k = scheduled.schedule.max_k
    if k == 0:  # drafting off everywhere: the static variant would be the baseline
        return None
    if by_depth(scheduled)[1].tau(k) is not None:
        return at_depth(scheduled, k)
    # no SLO carried to that depth: keep the runbook's (asked, not caught: at_depth's
    # assertion is an invariant, gone under python -O)
    spec = scheduled.runbook.speculation.model_copy(
        update={"num_speculative_tokens": k, "schedule": None})
    return scheduled.model_copy(update={"runbook": scheduled.runbook.model_copy(
        update={"speculation": spec}), "schedule": None})


def bench_levels(schedule: ResolvedSchedule, holds: int) -> list[int]:
    """`specpair bench`'s default concurrencies under a schedule: every range's ends (the
    load on either side of each change of K, and where the last range stops), bounded by
    the most requests the deployment holds (`holds`, its max running requests)."""
    points = {min(p, holds) for r in schedule.ranges for p in (r.start, r.end)}
    return sorted(points)
