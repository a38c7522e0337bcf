"""The planner: one candidate at a time through the budget, the step model and the gate,
with the operating point it runs at; each distinct runbook variant is validated, budgeted
and set up once for the whole search."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from specpair.analyse import calibrated_params
from specpair.analyse.acceptance import by_depth, shape_depth
from specpair.analyse.acceptance import record_mismatch as _record_mismatch
from specpair.analyse.budget import compute, recompute
from specpair.analyse.calibrate import fit_pair
from specpair.analyse.checks.gate import Context, failing, run
from specpair.analyse.latency import capacity, setup, slo_check
from specpair.analyse.plan.candidates import (
    BASELINE,
    DeploymentChoice,
    ShapeChoice,
    deployment_choices,
    parallel_changes,
    shapes,
)
from specpair.analyse.plan.evaluators import (
    Evaluator,
    Operating,
    ScheduledEvaluator,
)
from specpair.analyse.plan.inputs import mean_output_tokens, mean_prompt_tokens, validation
from specpair.analyse.plan.operating import TAU, Goal
from specpair.analyse.plan.options import Options, PlanError
from specpair.analyse.plan.results import Mode, Row
from specpair.analyse.plan.variants import (
    Changes,
    SectionKey,
    at_path,
    effective_changes,
    gpu_value,
    hashable,
    variant,
)
from specpair.analyse.schedule import derive, k0_slowdown, pinned
from specpair.analyse.staging import StagingPlan
from specpair.analyse.staging import plan as staging_plan
from specpair.analyse.step_inputs import (
    _Setup,
    expected_context,
    unmodelled,
)
from specpair.analyse.step_params import StepParams
from specpair.facts import hardware
from specpair.model.budget import Budget, Scenario
from specpair.model.catalogue import unwaivable
from specpair.model.errors import SpecpairError
from specpair.model.findings import Finding
from specpair.resolve.pair import ResolvedPair


@dataclass
class Stats:
    """What the search dropped, by reason (the plan's `Counts`), and the candidates seen."""

    refusals: dict[str, int] = field(default_factory=dict)
    over_budget: int = 0
    beyond: int = 0
    no_point: int = 0
    other: int = 0
    candidates: int = 0
    not_modelled: int = 0


def _engine_refusals(findings: list[Finding]) -> list[str]:
    blocking = unwaivable()
    return [f.rule for f in findings if f.rule in blocking and f.severity == "error"]


def _baseline_refusals(pair: ResolvedPair, budget: Budget) -> list[str]:
    """What the baseline server would refuse: the gate's own baseline rules (context,
    the target's heads, the baseline budget, the baseline launch) on the pair without
    its draft."""
    return _engine_refusals(run(Context(pair, budget=budget, speculate=False)))


@dataclass(frozen=True)
class _Point:
    """A candidate's operating point and the final variant that runs it."""

    op: Operating
    replicas: int
    missed: str | None
    """Why no operating point meets the targets and the SLO (`op` is then shown, not
    ranked); None when one does."""
    cap: int
    """The most sequences one replica holds, as last checked (`Planner._settle`)."""
    final: ResolvedPair
    budget: Budget
    scenario: Scenario


class Planner:
    def __init__(self, pair: ResolvedPair, opts: Options) -> None:
        self.pair = pair
        self.opts = opts
        rb = pair.runbook
        self.targets = opts.targets
        if self.targets.concurrency is not None and self.targets.rate is not None:
            raise PlanError("give --concurrency or --rate, not both")
        declared = rb.deployment.concurrency or rb.deployment.max_running_requests
        if self.targets.rate is not None:
            self.mode: Mode = "rate"
            self.concurrency = None
        elif self.targets.concurrency is not None or declared is not None:
            self.mode = "concurrency"
            self.concurrency = self.targets.concurrency or declared
            self.concurrency_source = "given" if self.targets.concurrency is not None else (
                "the runbook's deployment.concurrency" if rb.deployment.concurrency else
                "the runbook's max_running_requests")
        else:
            self.mode = "max"
            self.concurrency = None
        if self.mode != "concurrency":
            self.concurrency_source = ""
        self.gpus = list(opts.gpus) or [pair.gpu]
        self.max_gpus = opts.max_gpus or rb.deployment.gpus_per_node
        self.context, self.context_source = expected_context(pair)
        self.prompt = mean_prompt_tokens(pair)
        self.output = mean_output_tokens(pair)
        self.ref_depth = shape_depth(pair)
        self.curve, self.slo_curve = by_depth(pair)
        self.own_params = self._own_params()
        # GPU key → params_for's answer. Sound: it reads only the key, this planner's pair
        # (fixed) and the calibration data (`calibration_data.load` is cached for the process)
        self._params: dict[str, tuple[StepParams, str, tuple[float | None, str]]] = {}
        self._staging: list[tuple[tuple[Any, ...], StagingPlan]] = []
        self._dump = rb.model_dump(mode="json")  # the base of every variant (`variant`)
        self._variants: dict[tuple[tuple[tuple[str, ...], tuple[str, Any]], ...],
                             ResolvedPair] = {}
        self._sections: dict[SectionKey, Any] = {}  # `variant`'s, of this pair's variants
        self._setups: dict[int, tuple[ResolvedPair, Budget, _Setup]] = {}
        # id(variant) → (variant, its budget or the refusal): variants are shared between
        # candidates (`_variant`), and budget.compute memoises nothing
        self._budgets: dict[int, tuple[ResolvedPair, Budget | SpecpairError]] = {}
        self.stats = Stats()
        self.evaluators: dict[str, Evaluator] = {}  # row key → its predictions
        self.goal = Goal(self.mode, self.targets, self.concurrency, self.output,
                         self.max_gpus)

    # -- parameters

    def _own_params(self) -> tuple[str, StepParams, str] | None:
        """The pair's own fit applies on the GPU its records were measured on."""
        if self.pair.measurement is None or _record_mismatch(self.pair):
            return None
        own = fit_pair(self.pair, compute(self.pair), self.pair.measurement)
        if own is None:
            return None
        return self.pair.gpu, own.params, own.provenance

    def params_for(self, gpu_key: str) -> tuple[StepParams, str, tuple[float | None, str]]:
        if gpu_key not in self._params:
            self._params[gpu_key] = self._params_for(gpu_key)
        return self._params[gpu_key]

    def _params_for(self, gpu_key: str) -> tuple[StepParams, str, tuple[float | None, str]]:
        engine = self.pair.runbook.engine.name.value
        family = hardware.resolve(gpu_key).family if hardware.lookup(gpu_key) else None
        if self.own_params is not None and self.own_params[0] == gpu_key:
            return self.own_params[1], self.own_params[2], (None, "fitted on this pair's "
                                                            "own bench records")
        method = self.pair.runbook.speculation.method.value
        chosen = calibrated_params.params_for(family, engine, method)
        return chosen.params, chosen.provenance, validation(family, engine, method)

    # -- one candidate

    def _changes(self, d: DeploymentChoice, s: ShapeChoice) -> Changes:
        rb = self.pair.runbook
        ch: Changes = {("deployment", "gpu"): gpu_value(rb, d.gpu),
                       ("deployment", "kv_cache_dtype"): d.kv.value}
        ch.update(parallel_changes(rb, d.tensor))
        if d.memory_fraction is not None or rb.deployment.memory_fraction is not None:
            ch[("deployment", "memory_fraction")] = d.memory_fraction
        if rb.speculation.schedule is not None and not s.scheduled:
            ch[("speculation", "schedule")] = "static"  # a static depth is static
        ch.update(dict(s.changes))
        if s.speculative:
            tau_slo = self.slo_curve.tau(s.depth)
            assert tau_slo is not None
            ch[("acceptance", "slo", "min_length")] = round(tau_slo, 2)
        return ch

    def _evaluator(self, pair: ResolvedPair, budget: Budget, depth: int,
                   tau: float | None) -> tuple[Evaluator, str, tuple[float | None, str]]:
        params, source, validation = self.params_for(pair.gpu)
        # one setup per variant object: `setup` reads the pair, its budget (`compute`'s,
        # one per pair object) and the GPU's parameters, all fixed for a given `pair`
        known = self._setups.get(id(pair))
        if known is None or known[0] is not pair or known[1] is not budget:
            known = self._setups[id(pair)] = (pair, budget, setup(pair, budget, params))
        s = known[2]
        if pair.runbook.speculation.schedule is not None and tau is not None:
            return (ScheduledEvaluator(
                s.target, s.draft, s.shape, s.hw, params, s.context, self.prompt, tau,
                s.speedup_band, s.throughput_band,
                schedule=pinned(pair) or derive(pair, budget, self.curve, params),
                method=pair.runbook.speculation.method.value, curve=self.curve,
                slo_curve=self.slo_curve, k0_slowdown=k0_slowdown(pair)), source, validation)
        return (Evaluator(s.target, s.draft, s.shape, s.hw, params, s.context, self.prompt,
                          tau, s.speedup_band, s.throughput_band), source, validation)

    def evaluate(self, d: DeploymentChoice, s: ShapeChoice) -> Row | None:
        """One candidate, with its operating point and gate verdict; None when an engine
        would refuse it or the budget cannot hold it (counted in the stats)."""
        self.stats.candidates += 1
        changes = self._changes(d, s)
        screened = self._screen(s, changes)
        if screened is None:
            return None
        screen, budget, tau, scenario = screened
        # the plan sets max_running_requests itself: the engine's default cap does not
        # bound it, the KV pool (and state slots) do
        cap = _kv_capacity(scenario, self.context)
        ev, source, validation = self._evaluator(screen, budget, s.depth, tau)
        if isinstance(ev, ScheduledEvaluator) and ev.schedule is not None \
                and ev.schedule.max_k == 0:
            # no depth pays at any load: the target alone, with a draft loaded for nothing
            self.stats.no_point += 1
            return None
        tau_slo = self.slo_curve.tau(s.depth) if s.speculative else None
        gpus_per_replica = d.tensor * screen.runbook.deployment.parallel.pipeline
        point = self._settle(ev, cap, gpus_per_replica, s, changes, budget, tau, tau_slo)
        findings = self._gate(s, point, screen, budget)
        if findings is None:
            return None
        if point.missed is not None:
            self.stats.no_point += 1
        elif findings:
            self.stats.other += 1
        key = f"{d.label()} · {s.label}"
        self.evaluators[key] = ev
        return self._row(key, d, s, changes, ev, point, gpus_per_replica, tau, tau_slo,
                         findings, source, validation)

    def _screen(self, s: ShapeChoice, changes: Changes
                ) -> tuple[ResolvedPair, Budget, float | None, Scenario] | None:
        """The candidate at the engine's default request cap (its screening variant), that
        variant's budget, the expected τ at the shape's depth and the budget's scenario;
        None, counted in the stats, when the latency model refuses the variant, the budget
        refuses or cannot hold it, the depth is past the acceptance curve, or the baseline
        server would refuse it."""
        screen = self._variant({**changes, ("deployment", "max_running_requests"): None})
        if unmodelled(screen) is not None:  # e.g. --max-gpus wider than a node: no number
            self.stats.not_modelled += 1
            return None
        try:
            budget = self._budget(screen)
        except SpecpairError:
            self._refused(["SP501"])
            return None
        tau = self.curve.tau(s.depth) if s.speculative else None
        if s.speculative and tau is None:
            self.stats.beyond += 1
            return None
        scenario = budget.speculative if s.speculative else budget.baseline
        assert scenario is not None
        if not scenario.fits:
            self.stats.over_budget += 1
            return None
        if not s.speculative:
            refused = _baseline_refusals(screen, budget)
            if refused:
                self._refused(refused)
                return None
        return screen, budget, tau, scenario

    def _settle(self, ev: Evaluator, cap: int, gpus_per_replica: int, s: ShapeChoice,
                changes: Changes, budget: Budget, tau: float | None, tau_slo: float | None
                ) -> _Point:
        """The operating point and the final variant that runs it: `changes` get the
        chosen concurrency as max_running_requests (and as concurrency where the runbook
        states one), whose request pool takes KV room, so the capacity is checked again on
        the final variant's budget (`budget`: the screening variant's), up to 3 times."""
        for _ in range(3):  # the request pool the chosen concurrency needs takes KV room
            chosen = self.goal.operate(ev, cap, gpus_per_replica, tau_slo)
            if tau is not None and tau_slo is not None and tau < tau_slo - 1e-9:
                # the SLO at this depth is a floor the expected acceptance does not reach
                chosen = (f"{TAU}: expected τ {tau:.2f} is below the SLO at this depth "
                          f"({tau_slo:.2f}): the SLO would fire")
            if isinstance(chosen, str):
                op, replicas = ev.at(min(self.concurrency or cap, cap)), 1
            else:
                op, replicas = chosen
            changes[("deployment", "max_running_requests")] = op.concurrency
            if self.pair.runbook.deployment.concurrency is not None:
                changes[("deployment", "concurrency")] = op.concurrency
            final = self._variant(changes)
            final_budget = self._budget(final, near=budget)  # `screen`'s
            maybe = final_budget.speculative if s.speculative else final_budget.baseline
            assert maybe is not None
            final_scenario: Scenario = maybe
            held, _ = capacity(final_scenario, self.context)
            if held >= op.concurrency or held >= cap:
                break
            cap = held
        return _Point(op, replicas, chosen if isinstance(chosen, str) else None, cap, final,
                      final_budget, final_scenario)

    def _gate(self, s: ShapeChoice, point: _Point, screen: ResolvedPair, budget: Budget
              ) -> list[str] | None:
        """The gate rules the final variant fails ("rule: message"); None, counted, when
        an engine would refuse it (the baseline: the baseline server's rules alone)."""
        if not s.speculative:
            refused_final = _baseline_refusals(point.final, point.budget)
            if refused_final:
                self._refused(refused_final)
                return None
            return []
        got = run(self._gate_context(point.final, point.budget, screen, budget))
        engine_rules = _engine_refusals(got)
        if engine_rules:
            self._refused(engine_rules)
            return None
        return [f"{f.rule}: {f.message}" for f in failing(got)]

    def _row(self, key: str, d: DeploymentChoice, s: ShapeChoice, changes: Changes,
             ev: Evaluator, point: _Point, gpus_per_replica: int, tau: float | None,
             tau_slo: float | None, findings: list[str], source: str,
             validation: tuple[float | None, str]) -> Row:
        """The candidate's row: its prediction with the step model's error interval."""
        op, replicas, scenario = point.op, point.replicas, point.scenario
        meets = point.missed is None
        total_gpus = replicas * gpus_per_replica
        margin = None
        if tau_slo is not None and op.break_even:
            margin = round(100 * (tau_slo / op.break_even - 1), 1)
        r_lo, r_hi = ev.throughput_ratio()
        full = _full_context(scenario, self.pair.runbook.deployment.context_length)
        per_gpu = op.throughput * replicas / total_gpus
        even_range = None
        if op.break_even is not None and ev.speedup_band is not None:
            lo_e, hi_e = ev.speedup_band.around_inverse(op.break_even)
            even_range = (round(lo_e, 3), round(hi_e, 3))
        return Row(
            key=key, gpu=d.gpu, gpus=total_gpus, replicas=replicas,
            tensor=d.tensor, kv_cache_dtype=d.kv.value, memory_fraction=d.memory_fraction,
            shape=s.label, depth=s.depth, concurrency=op.concurrency, capacity=point.cap,
            full_context_sequences=full, holds_concurrency=(
                full >= op.concurrency if self.mode == "concurrency" else None),
            tokens_per_s_per_gpu=round(per_gpu, 1),
            tokens_per_s_per_gpu_range=(round(per_gpu / r_hi, 1), round(per_gpu / r_lo, 1)),
            tokens_per_s_per_request=round(op.per_request, 1),
            tpot_ms=round(op.tpot_s * 1e3, 2),
            tpot_ms_range=(round(op.tpot_s * 1e3 * r_lo, 2), round(op.tpot_s * 1e3 * r_hi, 2)),
            ttft_ms=round(op.ttft_s * 1e3, 1),
            tau=None if tau is None else round(tau, 3),
            tau_slo=None if tau_slo is None else round(tau_slo, 2),
            break_even=None if op.break_even is None else round(op.break_even, 3),
            break_even_range=even_range, slo_margin_pct=margin, kv_tokens=scenario.max_total_tokens,
            kv_tokens_estimate=scenario.capacity_estimate,
            budget_fits=scenario.fits, budget_verdict=scenario.verdict, meets_targets=meets,
            notes=[] if point.missed is None else [point.missed], check_failures=findings,
            passes_check=meets and not findings,
            changes=effective_changes(self.pair, changes if s.speculative else {
                k: v for k, v in changes.items() if k[0] == "deployment"}),
            params_source=source, validation_pct=validation[0], validation=validation[1])

    def _budget(self, pair: ResolvedPair, near: Budget | None = None) -> Budget:
        """`compute(pair)` once per variant object; a refusal is raised again each time.
        `near`: the budget of a variant that differs from `pair` in
        deployment.max_running_requests and deployment.concurrency alone (a candidate's
        screening variant), from which `pair`'s is derived where the release can
        (`budget.recompute`)."""
        held = self._budgets.get(id(pair))
        if held is None or held[0] is not pair:
            try:
                result: Budget | SpecpairError = (
                    compute(pair) if near is None else recompute(near, pair))
            except SpecpairError as exc:
                result = exc
            held = self._budgets[id(pair)] = (pair, result)
        if isinstance(held[1], SpecpairError):
            raise held[1]
        return held[1]

    def _variant(self, changes: Changes) -> ResolvedPair:
        """`variant(self.pair, changes)`, one object per distinct runbook: changes that set
        a field to its current value are no change, so candidates whose runbooks come out
        equal (a baseline and a speculative shape of one deployment whose SLO at the
        shape's depth is the runbook's own) share the variant, and with it the budget
        (`_budget`, once per variant object)."""
        effective = tuple(sorted((path, hashable(value)) for path, value in changes.items()
                                 if at_path(self._dump, path) != value))
        found = self._variants.get(effective)
        if found is None:
            found = self._variants[effective] = variant(self.pair, changes, self._dump,
                                                        self._sections)
        return found

    def _same_setup(self, budget: Budget, screen: ResolvedPair, screen_budget: Budget
                    ) -> _Setup | None:
        """The evaluator's setup of `screen` where it is that of the final variant whose
        budget is `budget`, for the same parameters: the final variant differs from
        `screen` in deployment.max_running_requests and deployment.concurrency alone,
        which `setup` does not read (it reads the parallel sizes, context, shape, GPU and
        models), and of the budget `setup` reads the two cells of the speculative
        scenario (else the baseline), compared here."""
        held = self._setups.get(id(screen))
        if held is None or held[0] is not screen or held[1] is not screen_budget:
            return None
        a = budget.speculative or budget.baseline
        b = screen_budget.speculative or screen_budget.baseline
        if (a.cell_target, a.cell_draft) != (b.cell_target, b.cell_draft):
            return None
        return held[2]

    def _gate_context(self, final: ResolvedPair, budget: Budget,
                      screen: ResolvedPair | None = None,
                      screen_budget: Budget | None = None) -> Context:
        """The context `run(Context(final))` would build, reusing `budget`: given no
        budget, `run` sets `compute(final)` (deterministic: `budget` is its result) and
        `model(final, budget)`, and on a SpecpairError leaves both unset. Of the latency
        model the only rule that reads it (SP701) reads the concurrency and SLO verdict:
        `slo_check` states those (one code path with `model`, the same refusals) without
        the curve and assumptions the candidate would never show, and with the setup of
        the candidate's `screen` variant where it is the final one's (`_same_setup`; the
        step model's refusal, the one `setup` raises, was asked of `screen`)."""
        known = None if screen is None or screen_budget is None else \
            self._same_setup(budget, screen, screen_budget)
        try:
            ctx = Context(final, budget=budget, slo=slo_check(final, budget, known))
        except SpecpairError:
            ctx = Context(final)
        ctx.staging = self._staging_plan(final)
        return ctx

    def _staging_plan(self, pair: ResolvedPair) -> StagingPlan:
        """`staging.plan(pair)`, memoised on everything it reads: the runbook's staging
        section and cuda_graphs, the artifacts' download sizes (compared by value; no
        candidate changes them, so one plan serves the whole search)."""
        rb, draft = pair.runbook, pair.draft
        key = (rb.staging, rb.deployment.cuda_graphs, pair.target.download_bytes,
               None if draft is None else (draft.bundled, draft.download_bytes))
        for seen, staged in self._staging:
            if seen == key:
                return staged
        staged = staging_plan(pair)
        self._staging.append((key, staged))
        return staged

    def _refused(self, rules: list[str]) -> None:
        for r in sorted(set(rules)):
            self.stats.refusals[r] = self.stats.refusals.get(r, 0) + 1

    def candidates(self) -> Iterator[tuple[DeploymentChoice, ShapeChoice]]:
        for d in deployment_choices(self.pair, self.opts):
            for s in [BASELINE, *shapes(self.pair)]:
                yield d, s


def _full_context(scenario: Scenario, context_length: int) -> int:
    """Sequences the pool holds with every one at the context length (none: 0, not the
    one `_kv_capacity` lets a search run at)."""
    n = scenario.max_total_tokens // max(context_length, 1)
    return n if scenario.state_slots is None else min(n, scenario.state_slots)


def _kv_capacity(scenario: Scenario, context: int) -> int:
    n = scenario.max_total_tokens // max(context, 1)
    if scenario.state_slots is not None:
        n = min(n, scenario.state_slots)
    return max(n, 1)


