"""`specpair plan`: the deployment of a pair that serves the most under its SLO and targets.

The search runs the same pipeline a runbook does. Each candidate is a runbook variant
(GPU type, TP, KV dtype, memory fraction, the draft's depth, or no draft at all) that goes
through the engine release's budget (`specpair.analyse.budget`), the calibrated step model
(`specpair.analyse.stepmodel` with `specpair.analyse.calibration`'s parameters) and the whole gate
(`specpair.analyse.checks`, which holds the engines' start-up rules). Nothing is ranked that an
engine would refuse or the budget cannot hold, and a candidate that fails the gate for
any other reason is shown with the rule but never recommended.

Operating point, per candidate:

- a concurrency given (`--concurrency`, else the runbook's expected one): evaluated there;
  a deployment that cannot hold it, or misses a latency target there, drops out;
- no concurrency: the most concurrent sequences the deployment holds while meeting the
  latency targets and, for a draft, keeping the SLO 10% above break-even;
- a request rate (`--rate`): the fewest replicas of the deployment that serve it, each at
  the lowest concurrency that keeps up (Little's law on the model's own throughput).

Acceptance by depth comes from `specpair.analyse.acceptance`: the pair's per-position
measurements where they exist, else its reference τ, else its SLO; the SLO is carried to
each depth the same way, so the written runbook states the floor of the shape it runs.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from specpair.analyse import calibration
from specpair.analyse.acceptance import AcceptanceCurve, by_depth, shape_depth
from specpair.analyse.acceptance import record_mismatch as _record_mismatch
from specpair.analyse.budget import compute, recompute
from specpair.analyse.calibrate import fit_pair
from specpair.analyse.checks.gate import Context, failing, run
from specpair.analyse.latency import SLO_MARGIN, capacity, setup, slo_check
from specpair.analyse.schedule import derive, pinned
from specpair.analyse.staging import StagingPlan
from specpair.analyse.staging import plan as staging_plan
from specpair.analyse.step_inputs import (
    CHARS_PER_TOKEN,
    _Setup,
    expected_context,
    not_modelled_text,
    unmodelled,
)
from specpair.analyse.stepmodel import (
    Forward,
    Hardware,
    StepParams,
    StepTimes,
    drafter_family,
    forward_time,
    memo_step_times,
    shape_for,
)
from specpair.bench.workloads import generate
from specpair.engines import verified_layouts
from specpair.engines.schedule_model import ResolvedSchedule
from specpair.facts import hardware
from specpair.model.budget import Budget, Scenario
from specpair.model.catalogue import unwaivable
from specpair.model.common import KVDtype, Method, Strict
from specpair.model.errors import SpecpairError
from specpair.model.findings import Finding
from specpair.model.memo import value_memo
from specpair.model.runbook import Runbook, Workload
from specpair.resolve.pair import ResolvedPair

TP_SIZES = (1, 2, 4, 8, 16)
MAX_DEPTH = 8
"""Deepest chain or tree searched: the published sweeps stop at 7-8 drafted tokens."""
MEMORY_FRACTIONS = (0.80, 0.85, 0.90)
"""Searched besides the engine default and the runbook's own value; above 0.90 the
engines' activation and graph headroom is the operator's call, not a planner's."""
KV_DTYPES = (KVDtype.AUTO, KVDtype.FP8_E4M3)
COMMON = "common"
Mode = Literal["concurrency", "max", "rate"]
Changes = dict[tuple[str, ...], Any]


class PlanError(Exception):
    """Bad planner options (the CLI turns it into a usage error)."""


@dataclass(frozen=True)
class Targets:
    tpot_ms: float | None = None
    ttft_ms: float | None = None
    concurrency: int | None = None
    rate: float | None = None


@dataclass(frozen=True)
class Options:
    gpus: tuple[str, ...] = ()
    """Catalog keys; empty: the runbook's GPU."""
    max_gpus: int | None = None
    """GPUs one replica may use (TP × PP); default: the runbook's GPUs per node."""
    targets: Targets = Targets()
    top: int = 10


# ------------------------------------------------------------------ the search space


@dataclass(frozen=True)
class DeploymentChoice:
    gpu: str
    tensor: int
    kv: KVDtype
    memory_fraction: float | None

    def label(self) -> str:
        mf = "default" if self.memory_fraction is None else f"{self.memory_fraction:g}"
        return f"{self.gpu} TP{self.tensor} KV {self.kv.value} mem {mf}"


@dataclass(frozen=True)
class ShapeChoice:
    label: str
    depth: int               # 0: no draft; a schedule: its largest K
    changes: tuple[tuple[tuple[str, ...], Any], ...]
    scheduled: bool = False  # K by batch size (`specpair.analyse.schedule`), up to `depth`

    @property
    def speculative(self) -> bool:
        return self.depth > 0


BASELINE = ShapeChoice("no draft (target alone)", 0, ())


def shapes(pair: ResolvedPair) -> list[ShapeChoice]:
    """The draft shapes the pair's method supports (the runbook's own among them)."""
    spec = pair.runbook.speculation
    m = spec.method
    out: list[ShapeChoice] = []
    if m.is_block_drafter:
        # SP303: a block drafter runs the block it was trained with; nothing to search
        assert spec.block_size is not None
        depth = spec.block_size if m is Method.DSPARK else spec.block_size - 1
        out.append(ShapeChoice(f"block {spec.block_size}", depth, ()))
    elif spec.num_steps is not None:
        for steps in range(1, MAX_DEPTH + 1):
            ch: list[tuple[tuple[str, ...], Any]] = [(("speculation", "num_steps"), steps)]
            width = spec.num_draft_tokens
            if spec.topk == 1:
                width = steps + 1
                if spec.num_draft_tokens is not None:
                    ch.append((("speculation", "num_draft_tokens"), width))
            out.append(ShapeChoice(f"{steps} steps × top-{spec.topk}, {width} verified",
                                   steps, tuple(ch)))
    else:
        for gamma in range(1, MAX_DEPTH + 1):
            out.append(ShapeChoice(f"γ = {gamma}", gamma,
                                   ((("speculation", "num_speculative_tokens"), gamma),)))
        if spec.schedule is not None and spec.num_speculative_tokens is not None:
            # the runbook's own schedule, as written (no change to recommend)
            form = "derived" if spec.schedule == "derived" else "pinned"
            out.append(ShapeChoice(f"schedule ({form}, K ≤ {spec.num_speculative_tokens})",
                                   spec.num_speculative_tokens, (), scheduled=True))
        if pair.release.schedule_refusal_for(pair) is None:
            # one schedule up to the deepest depth searched: it picks the shorter ones
            out.append(ShapeChoice(f"schedule (derived, K ≤ {MAX_DEPTH})", MAX_DEPTH, (
                (("speculation", "num_speculative_tokens"), MAX_DEPTH),
                (("speculation", "schedule"), "derived")), scheduled=True))
    return out


def _parallel_changes(rb: Runbook, tensor: int) -> Changes:
    par = rb.deployment.parallel
    ch: Changes = {("deployment", "parallel", "tensor"): tensor}
    # sizes that follow the target's TP in the runbook keep following it
    if par.draft_tensor is not None and par.draft_tensor == par.tensor and par.tensor != 1:
        ch[("deployment", "parallel", "draft_tensor")] = tensor
    if par.expert != 1 and par.expert == par.tensor:
        ch[("deployment", "parallel", "expert")] = tensor
    return ch


def deployment_choices(pair: ResolvedPair, opts: Options) -> list[DeploymentChoice]:
    rb = pair.runbook
    dep = rb.deployment
    gpus = list(opts.gpus) or [pair.gpu]
    max_gpus = opts.max_gpus or dep.gpus_per_node
    pp = dep.parallel.pipeline
    tps = [t for t in TP_SIZES if t * pp <= max_gpus and t <= dep.gpus_per_node]
    if not tps:
        raise PlanError(f"no TP size fits {max_gpus} GPU(s) with pipeline size {pp}")
    # a runbook that sets the fraction keeps setting one (an edit never deletes a field)
    fractions: list[float | None] = [*MEMORY_FRACTIONS]
    if dep.memory_fraction is None:
        fractions.insert(0, None)
    elif dep.memory_fraction not in fractions:
        fractions.append(dep.memory_fraction)
    kvs = list(dict.fromkeys([dep.kv_cache_dtype, *KV_DTYPES]))
    return [DeploymentChoice(g, t, kv, mf) for g in gpus for t in tps for kv in kvs
            for mf in fractions]


def expand_gpus(names: list[str]) -> tuple[str, ...]:
    """Catalog keys from --gpus (`common`: the catalog's common serving GPUs)."""
    out: list[str] = []
    for name in names:
        if name.strip().casefold() == COMMON:
            out.extend(g.key for g in hardware.CATALOG.values() if g.common)
            continue
        found = hardware.lookup(name)
        if found is None:
            raise PlanError(f"unknown GPU {name!r}; {hardware.unknown_hint(name)}")
        out.append(found.key)
    return tuple(dict.fromkeys(out))


# ------------------------------------------------------------------ runbook variants


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Sets `path` in `data`, copying each dict along it first: the rest stays shared with
    the dump `data` was copied from, which is therefore never changed."""
    for key in path[:-1]:
        child = dict(data[key]) if key in data else {}
        data[key] = child
        data = child
    data[path[-1]] = value


_ABSENT = object()


def _at(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path` in a runbook dump (`_ABSENT` where it has none)."""
    value: Any = data
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return _ABSENT
        value = value[key]
    return value


def _hashable(value: Any) -> tuple[str, Any]:
    """A change's value as a key: typed (1, 1.0 and True are equal in Python but not in a
    runbook), dicts and lists (an inline GPU) as canonical JSON."""
    if isinstance(value, dict | list):
        return "json", json.dumps(value, sort_keys=True)
    return type(value).__name__, value


def _get(rb: Runbook, path: tuple[str, ...]) -> Any:
    value: Any = rb
    for key in path:
        value = getattr(value, key)
    return value.value if hasattr(value, "value") else value


_SECTIONS: dict[str, TypeAdapter[Any]] = {
    name: TypeAdapter(info.rebuild_annotation()) for name, info in Runbook.model_fields.items()}
# Runbook has no validators of its own (only its sections do), so validating the changed
# sections alone accepts and builds exactly what validating the whole runbook would
_WHOLE = bool(Runbook.__pydantic_decorators__.model_validators
              or Runbook.__pydantic_decorators__.field_validators)


SectionKey = tuple[str, tuple[tuple[tuple[str, ...], tuple[str, Any]], ...]]


def _validated(rb: Runbook, section: Callable[[str], Any], changes: Changes,
               sections: dict[SectionKey, Any] | None = None) -> Runbook:
    """`Runbook.model_validate(data)`, where `data` is `rb`'s dump with `changes` and
    `section(name)` is `data[name]`: the sections they touch are validated, the rest is
    `rb`'s already validated sections (a plan search validates a variant per candidate;
    the whole runbook each time was a tenth of its cost). `sections`: validated sections
    by the changes made to them, kept by a caller whose `data` is always `rb`'s dump with
    `changes` (a plan's variants share a few dozen deployment, speculation and acceptance
    sections); a section found there is not built again."""
    if _WHOLE:
        data = {name: section(name) for name in Runbook.model_fields}
        return Runbook.model_validate({k: v for k, v in data.items() if v is not _ABSENT})
    by_section: dict[str, list[tuple[tuple[str, ...], tuple[str, Any]]]] = {}
    for path, value in changes.items():  # each section's changes, in one pass
        by_section.setdefault(path[0], []).append((path, _hashable(value)))
    update = {}
    for name in sorted(by_section):
        if sections is None:
            update[name] = _SECTIONS[name].validate_python(section(name))
            continue
        key = (name, tuple(sorted(by_section[name])))
        if key not in sections:
            sections[key] = _SECTIONS[name].validate_python(section(name))
        update[name] = sections[key]
    return rb.model_copy(update=update)


def variant(pair: ResolvedPair, changes: Changes, dump: dict[str, Any] | None = None,
            sections: dict[SectionKey, Any] | None = None) -> ResolvedPair:
    """The pair with its runbook changed; resolved facts (geometry, bytes) stay. `dump`:
    `pair.runbook.model_dump(mode="json")` made once by the caller (it is not changed:
    `_set` copies what it changes, and the schema has no before-validators that could
    change their input). `sections`: a memo of validated sections (`_validated`), only
    ever passed with variants of this one pair."""
    base = pair.runbook.model_dump(mode="json") if dump is None else dump

    def section(name: str) -> Any:
        """Section `name` of `base` with `changes`: what setting each change in a copy of
        the whole dump leaves there (a change touches its own section alone)."""
        data = {name: base[name]} if name in base else {}
        for path, value in changes.items():
            if path[0] == name:
                _set(data, path, value)
        return data.get(name, _ABSENT)

    try:
        rb = _validated(pair.runbook, section, changes, sections)
    except ValidationError as exc:  # a planner bug, not the user's input
        raise AssertionError(f"planner built an invalid runbook: {exc}") from None
    return pair.model_copy(update={"runbook": rb, "measurement": None,
                                   "engine": f"{rb.engine.name.value} {rb.engine.version}",
                                   "gpu": hardware.display_key(rb.deployment.gpu)})


def _gpu_value(rb: Runbook, key: str) -> Any:
    """The runbook value for a searched GPU: the runbook's own inline GPU stays inline
    (its name is no catalog key)."""
    own = rb.deployment.gpu
    return own.model_dump(mode="json") if not isinstance(own, str) and key == own.name else key


def effective_changes(pair: ResolvedPair, changes: Changes) -> dict[str, Any]:
    """Dotted field → value for the changes that differ from the runbook (for --write)."""
    out = {}
    for path, value in sorted(changes.items()):
        current = _get(pair.runbook, path)
        if hasattr(current, "model_dump"):  # an inline GPU: compare as data
            current = current.model_dump(mode="json")
        if current != value:
            out[".".join(path)] = value
    return out


# ------------------------------------------------------------------ prediction


@dataclass(frozen=True)
class Operating:
    concurrency: int
    per_request: float   # output tokens per second per request
    throughput: float    # output tokens per second, one replica
    tpot_s: float
    ttft_s: float
    break_even: float | None
    depth: int | None = None     # a schedule's K at this concurrency
    tau_slo: float | None = None  # the SLO at that K


@value_memo  # frozen forwards, hardware and parameters: every candidate's evaluator asks
def _prefill_s(fwd: Forward, prompt: int, hw: Hardware, p: StepParams, fixed: float) -> float:
    return forward_time(fwd, 1, prompt, prompt // 2, hw, p, fixed)


@dataclass
class Evaluator:
    """Predictions for one candidate at any concurrency (pure, cheap)."""

    target: Forward
    draft: Forward | None
    shape: Any
    hw: Hardware
    params: StepParams
    context: int
    prompt: int
    tau: float | None
    speedup_band: calibration.Interval | None = None
    throughput_band: calibration.Interval | None = None
    _prefill: float = 0.0

    def __post_init__(self) -> None:
        p = self.params
        self._prefill = _prefill_s(self.target, self.prompt, self.hw, p, p.forward_s)
        if self.draft is not None and self.tau is not None:
            self._prefill += _prefill_s(self.draft, self.prompt, self.hw, p, p.draft_s)

    def times(self, batch: int) -> StepTimes:
        return memo_step_times(self.target, self.draft if self.tau is not None else None,
                          self.shape, batch, self.context, self.hw, self.params)

    def throughput_ratio(self) -> tuple[float, float]:
        """predicted / true throughput, 10th-90th percentile: the baseline band, and for a
        draft the speedup band on top."""
        lo = hi = 1.0
        if self.throughput_band is not None:
            lo, hi = self.throughput_band.ratio_lo, self.throughput_band.ratio_hi
        if self.tau is not None and self.speedup_band is not None:
            lo, hi = lo * self.speedup_band.ratio_lo, hi * self.speedup_band.ratio_hi
        return lo, hi

    def at(self, batch: int) -> Operating:
        t = self.times(batch)
        if self.tau is None:
            step, tokens, even = t.decode, 1.0, None
        else:
            step, tokens, even = t.speculative(self.tau), self.tau, t.break_even()
        per_request = tokens / step
        # TTFT: the prompt's prefill (target, and the draft's own pass over it) plus the
        # step it waits for; queueing is not modelled
        return Operating(batch, per_request, per_request * batch, 1 / per_request,
                         self._prefill + step, even)


@dataclass
class ScheduledEvaluator(Evaluator):
    """A schedule's predictions: at each concurrency the K its ranges give there (vLLM's
    lookup: past the last range, its K), with that depth's shape and acceptance."""

    schedule: ResolvedSchedule | None = None
    method: str = ""
    curve: AcceptanceCurve | None = None
    slo_curve: AcceptanceCurve | None = None

    def at(self, batch: int) -> Operating:
        assert self.schedule is not None and self.curve is not None
        k = self.schedule.k_at(batch)
        tau = self.curve.tau(k) if k else None
        shape = shape_for(self.method, k, None, None, 1, None) if k else self.shape
        fixed = replace(self, tau=tau, shape=shape)  # a plain Evaluator of this depth
        op = Evaluator.at(fixed, batch)
        slo = self.slo_curve.tau(k) if k and self.slo_curve is not None else None
        return replace(op, depth=k, tau_slo=slo)


def _largest(ok: Callable[[int], bool], hi: int) -> int | None:
    """Largest c in [1, hi] with ok(c), for ok monotone (true then false)."""
    if hi < 1 or not ok(1):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _smallest(ok: Callable[[int], bool], hi: int) -> int | None:
    """Smallest c in [1, hi] with ok(c), for ok monotone (false then true)."""
    if hi < 1 or not ok(hi):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


# ------------------------------------------------------------------ results


class Row(Strict):
    key: str = Field(description="stable identity of the candidate")
    gpu: str
    gpus: int = Field(description="GPUs of all replicas")
    replicas: int
    tensor: int
    kv_cache_dtype: str
    memory_fraction: float | None = Field(description="None: the engine's default")
    shape: str
    depth: int = Field(description="most draft tokens a step can accept; 0: no draft")
    concurrency: int = Field(description="sequences in flight per replica")
    capacity: int = Field(description="most sequences one replica holds at the expected "
                                      "context")
    tokens_per_s_per_gpu: float
    tokens_per_s_per_gpu_range: tuple[float, float] = Field(
        description="interval from the step model's cross-validated error")
    tokens_per_s_per_request: float
    tpot_ms: float
    tpot_ms_range: tuple[float, float]
    ttft_ms: float
    tau: float | None = Field(description="expected tokens per verify step at this depth")
    tau_slo: float | None = Field(description="the SLO carried to this depth")
    break_even: float | None = Field(description="τ* at this concurrency")
    break_even_range: tuple[float, float] | None = None
    slo_margin_pct: float | None = Field(description="(SLO τ / τ* − 1) · 100")
    kv_tokens: int
    budget_fits: bool
    budget_verdict: str
    meets_targets: bool
    notes: list[str]
    check_failures: list[str] = Field(description="gate rules that fail (ids and messages)")
    passes_check: bool
    changes: dict[str, Any] = Field(description="dotted runbook field → value (--write)")
    params_source: str
    validation_pct: float | None = Field(description="median absolute error, %, of the "
                                                     "step model on published speedups")
    validation: str = Field(description="the step model's error on published points of "
                                        "this GPU family × engine")


class FrontPoint(Strict):
    key: str
    concurrency: int
    tokens_per_s_per_gpu: float
    tokens_per_s_per_request: float
    speculative: bool
    label: str


class Counts(Strict):
    candidates: int
    deployments: int
    shapes: int
    refused_by_engine: int
    over_budget: int
    beyond_measured_depth: int
    no_operating_point: int
    fail_other_rules: int
    ranked: int
    not_modelled: int = Field(default=0, description="candidates the latency model refuses "
                              "by name (`stepmodel.deployment_refusal`): no number to rank")


class Plan(Strict):
    pair: str
    runbook: str
    engine: str
    mode: Mode
    concurrency_source: str = Field(description="where a fixed concurrency comes from")
    targets: dict[str, float | int | None]
    gpus: list[str]
    max_gpus: int
    acceptance_source: str
    slo_source: str
    expected_context: int
    prompt_tokens: int
    output_tokens: float
    rows: list[Row] = Field(description="ranked, best first (only what passes the engine "
                                        "rules and the budget)")
    front: list[FrontPoint]
    best: Row | None
    best_speculative: Row | None
    current: Row | None = Field(description="the runbook as written, evaluated the same way")
    current_not_modelled: str | None = Field(
        default=None, description="why the runbook as written has no row: the latency model "
                                  "refuses its deployment by name")
    counts: Counts
    refusals: dict[str, int] = Field(description="engine rule → candidates it refused")
    seconds: float
    ms_per_candidate: float
    assumptions: list[str]
    unverified: list[str] = Field(
        default_factory=list, description="the runbook's declared unverified KV layouts: "
                                          "every candidate's budget is unverified")


# ------------------------------------------------------------------ the planner


def validation(family: str | None, engine: str, method: str | None
               ) -> tuple[float | None, str]:
    """The step model's cross-validated (leave-one-source-out) error on this GPU family ×
    engine × drafter family, and the sentence saying where it comes from."""
    drafter = drafter_family(method) if method else "none"
    quantity: Literal["speedup", "throughput"] = "speedup" if method else "throughput"
    band = calibration.interval(family, engine, drafter, quantity)
    own = next((b for b in calibration.load().cross_validated
                if (b.family, b.engine, b.drafter, b.quantity)
                == (family, engine, "none" if quantity == "throughput" else drafter,
                    quantity)), None)
    pct = own.median_abs_error_pct if own is not None and not band.few else None
    return pct, (f"{quantity} ×{band.ratio_lo:.2f}–×{band.ratio_hi:.2f} "
                 f"(predicted / published, 10th-90th percentile): {band.label}")


@dataclass
class _Stats:
    refusals: dict[str, int] = field(default_factory=dict)
    over_budget: int = 0
    beyond: int = 0
    no_point: int = 0
    other: int = 0
    candidates: int = 0
    not_modelled: int = 0


def _synthetic(pair: ResolvedPair) -> list[Workload]:
    """The generated workloads (replay files are read by `specpair bench` only)."""
    return [w for w in pair.runbook.workloads if w.kind != "replay"]


@functools.cache
def _prompt_lengths(workload: Workload) -> tuple[int, ...]:
    """A generated workload's prompt lengths: a function of the (frozen) workload alone,
    and most pairs keep the default workloads, so a site build generates each once."""
    return tuple(len(r.prompt) for r in generate(workload))


def _mean_prompt_tokens(pair: ResolvedPair) -> int:
    prompts = [n for w in _synthetic(pair) for n in _prompt_lengths(w)]
    if not prompts:  # the split of prompt and answer is not guessed
        raise SpecpairError.single(pair.source_file, "the plan needs a synthetic workload "
                                   "for the split of prompt and answer tokens; this runbook "
                                   "has replay workloads only", "add a short-homogeneous or "
                                   "long-diverse workload sized like the replayed traffic")
    return max(1, round(sum(prompts) / len(prompts) / CHARS_PER_TOKEN))


def _mean_output_tokens(pair: ResolvedPair) -> float:
    ws = [w.max_tokens for w in _synthetic(pair) if w.max_tokens is not None]
    return sum(ws) / max(1, len(ws))


def _engine_refusals(findings: list[Finding]) -> list[str]:
    blocking = unwaivable()
    return [f.rule for f in findings if f.rule in blocking and f.severity == "error"]


def _baseline_refusals(pair: ResolvedPair, budget: Budget) -> list[str]:
    """What the baseline server would refuse: the gate's own baseline rules (context,
    the target's heads, the baseline budget, the baseline launch) on the pair without
    its draft."""
    return _engine_refusals(run(Context(pair, budget=budget, speculate=False)))


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
        self.prompt = _mean_prompt_tokens(pair)
        self.output = _mean_output_tokens(pair)
        self.ref_depth = shape_depth(pair)
        self.curve, self.slo_curve = by_depth(pair)
        self.own_params = self._own_params()
        # GPU key → params_for's answer. Sound: it reads only the key, this planner's pair
        # (fixed) and the calibration data (`calibration.load` is cached for the process)
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
        self.stats = _Stats()
        self.evaluators: dict[str, Evaluator] = {}  # row key → its predictions

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
        chosen = calibration.params_for(family, engine, method)
        return chosen.params, chosen.provenance, validation(family, engine, method)

    # -- one candidate

    def _changes(self, d: DeploymentChoice, s: ShapeChoice) -> Changes:
        rb = self.pair.runbook
        ch: Changes = {("deployment", "gpu"): _gpu_value(rb, d.gpu),
                       ("deployment", "kv_cache_dtype"): d.kv.value}
        ch.update(_parallel_changes(rb, d.tensor))
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
                slo_curve=self.slo_curve), source, validation)
        return (Evaluator(s.target, s.draft, s.shape, s.hw, params, s.context, self.prompt,
                          tau, s.speedup_band, s.throughput_band), source, validation)

    def _meets(self, op: Operating) -> bool:
        t = self.targets
        return (t.tpot_ms is None or op.tpot_s * 1e3 <= t.tpot_ms) and \
            (t.ttft_ms is None or op.ttft_s * 1e3 <= t.ttft_ms)

    def _pays(self, op: Operating, tau_slo: float | None) -> bool:
        floor = op.tau_slo if op.depth is not None else tau_slo
        return op.break_even is None or (floor is not None and
                                         floor >= op.break_even * (1 + SLO_MARGIN))

    def _operate(self, ev: Evaluator, cap: int, gpus: int, tau_slo: float | None
                 ) -> tuple[Operating, int] | str:
        """(operating point, replicas), or why there is none."""
        def good(c: int) -> bool:
            op = ev.at(c)
            return self._meets(op) and self._pays(op, tau_slo)

        if self.mode == "concurrency":
            c = self.concurrency
            assert c is not None
            if c > cap:
                return f"holds {cap} sequences, not {c}"
            op = ev.at(c)
            if not self._meets(op):
                return self._missed(op)
            if not self._pays(op, tau_slo):
                return f"the SLO is below break-even + 10% at {c} (τ* {op.break_even:.2f})"
            return op, 1
        top = _largest(good, cap)
        if top is None:
            op = ev.at(1)
            if not self._meets(op):
                return self._missed(op) + " even at concurrency 1"
            return f"the SLO is below break-even + 10% at every concurrency (τ* at 1: " \
                   f"{op.break_even:.2f})"
        if self.mode == "max":
            return ev.at(top), 1
        assert self.targets.rate is not None
        demand = self.targets.rate * self.output
        best = ev.at(top)
        replicas = max(1, math.ceil(demand / best.throughput - 1e-9))
        if replicas * gpus > self.max_gpus:
            return (f"needs {replicas} replicas of {gpus} GPU(s) for {demand:,.0f} tokens/s; "
                    f"--max-gpus is {self.max_gpus}")
        load = demand / replicas
        c = _smallest(lambda n: ev.at(n).throughput >= load, top)
        assert c is not None
        return ev.at(c), replicas

    def _missed(self, op: Operating) -> str:
        t = self.targets
        parts = []
        if t.tpot_ms is not None and op.tpot_s * 1e3 > t.tpot_ms:
            parts.append(f"TPOT {op.tpot_s * 1e3:.1f} ms > {t.tpot_ms:g}")
        if t.ttft_ms is not None and op.ttft_s * 1e3 > t.ttft_ms:
            parts.append(f"TTFT {op.ttft_s * 1e3:.0f} ms > {t.ttft_ms:g}")
        return "misses " + ", ".join(parts)

    def evaluate(self, d: DeploymentChoice, s: ShapeChoice) -> Row | None:
        """One candidate, with its operating point and gate verdict; None when an engine
        would refuse it or the budget cannot hold it (counted in the stats)."""
        self.stats.candidates += 1
        changes = self._changes(d, s)
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
        gpus_per_replica = d.tensor * screen.runbook.deployment.parallel.pipeline
        if not scenario.fits:
            self.stats.over_budget += 1
            return None
        if not s.speculative:
            refused = _baseline_refusals(screen, budget)
            if refused:
                self._refused(refused)
                return None
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
        notes: list[str] = []
        for _ in range(3):  # the request pool the chosen concurrency needs takes KV room
            chosen = self._operate(ev, cap, gpus_per_replica, tau_slo)
            if tau is not None and tau_slo is not None and tau < tau_slo - 1e-9:
                # the SLO at this depth is a floor the expected acceptance does not reach
                chosen = (f"expected τ {tau:.2f} is below the SLO at this depth "
                          f"({tau_slo:.2f}): the SLO would fire")
            if isinstance(chosen, str):
                op, replicas, meets = ev.at(min(self.concurrency or cap, cap)), 1, False
            else:
                (op, replicas), meets = chosen, True
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
        if isinstance(chosen, str):
            notes.append(chosen)
        scenario = final_scenario
        findings: list[str] = []
        if s.speculative:
            got = run(self._gate_context(final, final_budget, screen, budget))
            engine_rules = _engine_refusals(got)
            if engine_rules:
                self._refused(engine_rules)
                return None
            findings = [f"{f.rule}: {f.message}" for f in failing(got)]
        else:
            refused_final = _baseline_refusals(final, final_budget)
            if refused_final:
                self._refused(refused_final)
                return None
        if not meets:
            self.stats.no_point += 1
        elif findings:
            self.stats.other += 1
        total_gpus = replicas * gpus_per_replica
        margin = None
        if tau_slo is not None and op.break_even:
            margin = round(100 * (tau_slo / op.break_even - 1), 1)
        key = f"{d.label()} · {s.label}"
        self.evaluators[key] = ev
        r_lo, r_hi = ev.throughput_ratio()
        per_gpu = op.throughput * replicas / total_gpus
        even_range = None
        if op.break_even is not None and ev.speedup_band is not None:
            lo_e, hi_e = ev.speedup_band.around_inverse(op.break_even)
            even_range = (round(lo_e, 3), round(hi_e, 3))
        return Row(
            key=key, gpu=d.gpu, gpus=total_gpus, replicas=replicas,
            tensor=d.tensor, kv_cache_dtype=d.kv.value, memory_fraction=d.memory_fraction,
            shape=s.label, depth=s.depth, concurrency=op.concurrency, capacity=cap,
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
            budget_fits=scenario.fits, budget_verdict=scenario.verdict, meets_targets=meets,
            notes=notes, check_failures=findings, passes_check=meets and not findings,
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
        effective = tuple(sorted((path, _hashable(value)) for path, value in changes.items()
                                 if _at(self._dump, path) != value))
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

    # -- ranking and the front

    def _score(self, r: Row) -> tuple[float, ...]:
        if self.mode == "rate":
            return (r.gpus, -r.tokens_per_s_per_request, r.tensor)
        return (-r.tokens_per_s_per_gpu, -r.tokens_per_s_per_request, r.gpus)

    def front(self, rows: list[Row], evaluators: dict[str, tuple[Evaluator, Row]]
              ) -> list[FrontPoint]:
        points: list[FrontPoint] = []
        for key, (ev, row) in evaluators.items():
            levels = [row.concurrency]
            if self.mode == "max":
                levels = sorted({c for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
                                 if c < row.concurrency} | {row.concurrency})
            for c in levels:
                op = ev.at(c)
                points.append(FrontPoint(
                    key=key, concurrency=c,
                    tokens_per_s_per_gpu=round(op.throughput * row.replicas / row.gpus, 1),
                    tokens_per_s_per_request=round(op.per_request, 1),
                    speculative=row.depth > 0, label=f"{row.key} @ {c}"))
        front: list[FrontPoint] = []
        for p in sorted(points, key=lambda p: (-p.tokens_per_s_per_request,
                                               -p.tokens_per_s_per_gpu, p.label)):
            if not front or p.tokens_per_s_per_gpu > front[-1].tokens_per_s_per_gpu:
                front.append(p)
        return front


def _kv_capacity(scenario: Scenario, context: int) -> int:
    n = scenario.max_total_tokens // max(context, 1)
    if scenario.state_slots is not None:
        n = min(n, scenario.state_slots)
    return max(n, 1)


def plan(pair: ResolvedPair, opts: Options | None = None) -> Plan:
    opts = opts or Options()
    started = time.perf_counter()
    planner = Planner(pair, opts)
    rows: list[Row] = []
    evaluators: dict[str, tuple[Evaluator, Row]] = {}
    seen_deployments: set[DeploymentChoice] = set()
    all_shapes = [BASELINE, *shapes(pair)]
    for d, s in planner.candidates():
        seen_deployments.add(d)
        row = planner.evaluate(d, s)
        if row is not None:
            rows.append(row)
    good = _recommended_first(_dedupe(sorted((r for r in rows if r.passes_check),
                                             key=planner._score)), planner)
    rest = _dedupe(sorted((r for r in rows if not r.passes_check), key=planner._score))
    # the front is drawn from what passes
    for r in good:
        evaluators[r.key] = (planner.evaluators[r.key], r)
    front = planner.front(good, evaluators)
    current = _current(planner)
    elapsed = time.perf_counter() - started
    st = planner.stats
    counts = Counts(candidates=st.candidates, deployments=len(seen_deployments),
                    shapes=len(all_shapes), refused_by_engine=sum(st.refusals.values()),
                    over_budget=st.over_budget,
                    beyond_measured_depth=st.beyond, no_operating_point=st.no_point,
                    fail_other_rules=st.other, ranked=len(good), not_modelled=st.not_modelled)
    refusal = unmodelled(pair)
    t = planner.targets
    best = good[0] if good else None
    return Plan(
        pair=pair.name, runbook=pair.source_file, engine=pair.engine, mode=planner.mode,
        concurrency_source=planner.concurrency_source,
        targets={"tpot_ms": t.tpot_ms, "ttft_ms": t.ttft_ms,
                 "concurrency": planner.concurrency, "rate": t.rate},
        gpus=planner.gpus, max_gpus=planner.max_gpus,
        acceptance_source=planner.curve.source, slo_source=planner.slo_curve.source,
        expected_context=planner.context, prompt_tokens=planner.prompt,
        output_tokens=planner.output, rows=good + rest, front=front, best=best,
        best_speculative=next((r for r in good if r.depth > 0), None), current=current,
        current_not_modelled=None if refusal is None else not_modelled_text(refusal),
        counts=counts, refusals=dict(sorted(st.refusals.items())), seconds=round(elapsed, 3),
        ms_per_candidate=round(1e3 * elapsed / max(1, st.candidates), 2),
        assumptions=_assumptions(planner), unverified=verified_layouts.declared_notes(pair))


def _tied(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two predictions whose cross-validated intervals overlap: the model cannot rank them."""
    return a[0] <= b[1] and b[0] <= a[1]


def _change_count(r: Row) -> int:
    return len(r.changes) + (1 if r.depth == 0 else 0)  # dropping the draft is a change


def _dedupe(rows: list[Row]) -> list[Row]:
    """One row per distinct prediction: settings that change nothing at this operating
    point (e.g. a memory fraction when the pool is not the limit) collapse into the
    variant with the fewest changes."""
    best: dict[tuple[Any, ...], Row] = {}
    order: list[tuple[Any, ...]] = []
    for r in rows:
        k = (r.gpu, r.gpus, r.replicas, r.tensor, r.kv_cache_dtype, r.shape, r.concurrency,
             r.tokens_per_s_per_gpu, r.tokens_per_s_per_request)
        if k not in best:
            order.append(k)
            best[k] = r
        elif (_change_count(r), r.key) < (_change_count(best[k]), best[k].key):
            best[k] = r
    return [best[k] for k in order]


def _recommended_first(rows: list[Row], planner: Planner) -> list[Row]:
    if not rows:
        return rows
    top = rows[0]
    if planner.mode == "rate":
        # replicas are counted, not predicted: ties among the fewest GPUs on per-request speed
        ties = [r for r in rows if r.gpus == top.gpus and _tied(
            _scaled(r, r.tokens_per_s_per_request), _scaled(top, top.tokens_per_s_per_request))]
    else:
        ties = [r for r in rows if _tied(r.tokens_per_s_per_gpu_range,
                                         top.tokens_per_s_per_gpu_range)]
    pick = min(ties, key=lambda r: (_change_count(r), rows.index(r)))
    return [pick] + [r for r in rows if r is not pick]


def _scaled(r: Row, value: float) -> tuple[float, float]:
    """`value`'s interval with the row's relative throughput interval."""
    lo, hi = r.tokens_per_s_per_gpu_range
    base = r.tokens_per_s_per_gpu or 1.0
    return value * lo / base, value * hi / base


def _current(planner: Planner) -> Row | None:
    """The runbook as written, through the same evaluation (for comparison)."""
    rb = planner.pair.runbook
    dep = rb.deployment
    d = DeploymentChoice(planner.pair.gpu, dep.parallel.tensor, dep.kv_cache_dtype,
                         dep.memory_fraction)
    own = shape_depth(planner.pair)
    written = rb.speculation.schedule is not None  # as written: its schedule
    s = next((x for x in shapes(planner.pair) if x.depth == own and not x.changes
              and x.scheduled == written), None) or next(
        (x for x in shapes(planner.pair) if x.depth == own and not x.scheduled), None)
    if s is None:
        return None
    saved = planner.stats
    planner.stats = _Stats()
    try:
        return planner.evaluate(d, s)
    finally:
        planner.stats = saved


def _assumptions(p: Planner) -> list[str]:
    out = [
        f"acceptance by depth: {p.curve.source}",
        f"the SLO carried to each depth: {p.slo_curve.source}",
        f"expected context {p.context:,} tokens per sequence ({p.context_source}); mean "
        f"prompt {p.prompt:,} tokens, mean output {p.output:g} tokens (the workloads)",
        "a KV dtype does not change acceptance (FP8 KV can lower it slightly: measure "
        "before relying on it)",
        "TTFT is one prefill of the mean prompt (roofline, the fitted η) plus one step; "
        "queueing is not modelled and no published TTFT calibrates it",
        "memory bandwidth, the step model's roof: " + "; ".join(
            (p.pair.gpu_spec if g == p.pair.gpu else hardware.resolve(g)).bandwidth_summary
            for g in p.gpus),
        "memory fractions searched: " + ", ".join(sorted(
            {"engine default" if d.memory_fraction is None else f"{d.memory_fraction:g}"
             for d in deployment_choices(p.pair, p.opts)})),
    ]
    spec = p.pair.runbook.speculation
    if spec.num_steps is not None and spec.topk > 1:
        out.append(f"tree drafts: depth searched with top-{spec.topk} and "
                   f"{spec.num_draft_tokens} verified tokens kept (no source relates "
                   "acceptance to a tree's width); the tree is a chain of its depth")
    if spec.method.is_block_drafter:
        out.append("a block drafter runs the block it was trained with (SP303): only that "
                   "block is a candidate")
    if p.mode == "rate":
        out.append("a rate is served by identical replicas (data parallel), each at the "
                   "lowest concurrency that keeps up")
    return out
