"""Published speculative-decoding measurements and the step-time parameters fitted on them.

The data is `data/calibration.yaml` (reviewed, one source per point); this module reads
it, predicts each point with the step model (`specpair.stepmodel`), fits the parameters
per GPU family × engine on the points marked `fit`, and hands a deployment the parameters
of its family × engine, saying where they came from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field

from specpair import hardware
from specpair.schema.common import Strict
from specpair.stepmodel import Forward, Hardware, Shape, StepParams, fit, step_times

# Where no fit exists yet: plausible serving-engine figures, labelled as such wherever used.
# η_f 0.6: dense GEMMs in serving reach 50-70% of peak; kept as a prior in every fit.
UNCALIBRATED = StepParams(eta_bw=0.8, eta_flops=0.6, forward_s=2e-3, speculative_s=1e-3,
                          draft_s=0.5e-3, allreduce_s=20e-6, token_s=20e-6)
TP_ALLREDUCES_PER_LAYER = 2  # attention output and MLP output, under tensor parallelism


class ModelSpec(Strict):
    params: float
    bytes_per_param: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    experts: int | None = None
    top_k: int | None = None
    expert_params: float | None = None
    active_params: float | None = None
    source: str

    def forward(self, tp: int) -> Forward:
        kv = 2 * self.kv_heads * self.head_dim * self.layers * 2 / min(tp, self.kv_heads)
        attention = 2 * self.heads * 2 * self.head_dim * self.layers / tp
        active = self.active_params or self.params
        allreduces = TP_ALLREDUCES_PER_LAYER * self.layers if tp > 1 else 0
        if self.experts and self.top_k and self.expert_params:
            routed = self.experts * self.expert_params * self.layers
            return Forward((self.params - routed) * self.bytes_per_param / tp,
                           2 * active / tp, kv, routed * self.bytes_per_param / tp,
                           self.top_k / self.experts, attention, allreduces)
        return Forward(self.params * self.bytes_per_param / tp, 2 * active / tp, kv,
                       attention_flops_per_context_token=attention, allreduces=allreduces)


class Point(Strict):
    id: str
    sweep: str | None
    role: Literal["fit", "validate"]
    gpu: str
    engine: Literal["vllm", "sglang"]
    engine_version: str
    tp: int = 1
    target: str
    draft: str | None
    method: str | None
    num_speculative_tokens: int | None = None
    num_steps: int | None = None
    topk: int = 1
    num_draft_tokens: int | None = None
    block_size: int | None = None
    concurrency: int
    context: int
    workload: str
    baseline_tok_s: float | None = None
    speculative_tok_s: float | None = None
    speedup: float | None = None
    tau: float | None
    source: str
    note: str = ""

    @property
    def published_speedup(self) -> float | None:
        if self.baseline_tok_s and self.speculative_tok_s:
            return self.speculative_tok_s / self.baseline_tok_s
        return self.speedup

    @property
    def shape(self) -> Shape:
        return shape_for(self.method or "NONE", self.num_speculative_tokens, self.block_size,
                         self.num_steps, self.topk, self.num_draft_tokens)


class Fitted(Strict):
    family: str
    engine: Literal["vllm", "sglang"]
    params: StepParams
    fitted_on: list[str] = Field(description="ids of the points the fit used")


class NotModelled(Strict):
    source: str
    reason: str


class CalibrationData(Strict):
    models: dict[str, ModelSpec]
    points: list[Point]
    not_modelled: list[NotModelled] = Field(default_factory=list)
    fitted: list[Fitted] = Field(default_factory=list)


def shape_for(method: str, gamma: int | None, block: int | None, steps: int | None,
              topk: int, draft_tokens: int | None) -> Shape:
    """Draft forwards and verify width of one speculative step, per method."""
    if method == "NONE":
        return Shape(0, 0, 1, 1)
    if method == "NGRAM":
        g = gamma or 1
        return Shape(0, 0, g + 1, g + 1)
    if method == "DSPARK":
        b = block or 1
        return Shape(1, b, b + 1, b + 1)
    if method == "DFLASH":
        b = block or 1
        return Shape(1, b, b, b)
    if topk > 1 or (steps is not None and draft_tokens is not None):
        s = steps or 1
        return Shape(s, topk, draft_tokens or s + 1, s + 1)
    g = gamma or 1
    return Shape(g, 1, g + 1, g + 1)


@cache
def load() -> CalibrationData:
    text = resources.files("specpair").joinpath("data/calibration.yaml").read_text("utf-8")
    return CalibrationData.model_validate(yaml.safe_load(text))


def family_of(gpu_key: str) -> str:
    found = hardware.lookup(gpu_key)
    assert found is not None and found.family is not None, gpu_key
    return found.family


@dataclass(frozen=True)
class Prediction:
    baseline_tok_s: float
    speculative_tok_s: float | None
    speedup: float | None
    tau_used: float | None
    tau_anchored: bool


def hardware_of(gpu_key: str) -> Hardware:
    gpu = hardware.lookup(gpu_key)
    assert gpu is not None, gpu_key
    return Hardware(gpu.bandwidth_bytes_per_s, gpu.bf16_dense_flops, gpu.fp8_dense_flops)


def predict(point: Point, params: StepParams, data: CalibrationData,
            tau: float | None = None) -> Prediction:
    """Throughputs and speedup at the point; `tau` replaces the published τ (anchoring)."""
    target = data.models[point.target].forward(point.tp)
    draft = data.models[point.draft].forward(point.tp) if point.draft else None
    times = step_times(target, draft, point.shape, point.concurrency, point.context,
                       hardware_of(point.gpu), params)
    base = point.concurrency / times.decode
    used = tau if tau is not None else point.tau
    if used is None or point.method is None:
        return Prediction(base, None, None, None, False)
    spec = point.concurrency * used / times.speculative(used)
    return Prediction(base, spec, spec / base, used, tau is not None)


def fit_loss(points: list[Point], data: CalibrationData) -> Callable[[StepParams], float]:
    def loss(p: StepParams) -> float:
        total = 0.0
        for pt in points:
            pred = predict(pt, p, data)
            if pt.baseline_tok_s:
                total += math.log(pred.baseline_tok_s / pt.baseline_tok_s) ** 2
            if pt.speculative_tok_s and pred.speculative_tok_s:
                total += math.log(pred.speculative_tok_s / pt.speculative_tok_s) ** 2
        return total
    return loss


def identifiable(points: list[Point]) -> list[str]:
    """The parameters these points can pin down; the others keep UNCALIBRATED's values
    (no tensor parallelism: no all-reduce cost; one concurrency: no per-token cost). η_f
    stays at its prior: the published points are nearly all bandwidth- or overhead-bound,
    so a fit would set it anywhere (it matters once verify turns compute-bound)."""
    free = ["eta_bw", "forward_s", "speculative_s", "draft_s"]
    if any(p.tp > 1 for p in points):
        free.append("allreduce_s")
    if len({p.concurrency for p in points}) > 1:
        free.append("token_s")
    return free


def refit(data: CalibrationData) -> list[Fitted]:
    """Fit every GPU family × engine that has points with role `fit`."""
    groups: dict[tuple[str, str], list[Point]] = {}
    for pt in data.points:
        if pt.role == "fit":
            groups.setdefault((family_of(pt.gpu), pt.engine), []).append(pt)
    out = []
    for (family, engine), points in sorted(groups.items()):
        loss = fit_loss(points, data)
        params = fit(loss, UNCALIBRATED, identifiable(points))
        out.append(Fitted(family=family, engine=engine,
                          params=params, fitted_on=[p.id for p in points]))
    return out


@dataclass(frozen=True)
class Chosen:
    params: StepParams
    provenance: str


def params_for(family: str | None, engine: str) -> Chosen:
    """The fitted parameters for a GPU family × engine; else the same engine on another
    family (named); else the uncalibrated defaults (said so)."""
    fits = load().fitted
    for f in fits:
        if f.family == family and f.engine == engine:
            return Chosen(f.params, f"fitted on published {family} × {engine} measurements "
                                    f"({len(f.fitted_on)} points, data/calibration.yaml)")
    for f in fits:
        if f.engine == engine:
            where = f"GPU family {family}" if family else "a GPU declared inline"
            return Chosen(f.params, f"no published {engine} measurements on {where}: "
                                    f"borrowed from {f.family} × {engine} "
                                    f"({len(f.fitted_on)} points, data/calibration.yaml)")
    return Chosen(UNCALIBRATED, "uncalibrated defaults (no published measurements for "
                                f"{engine})")


# ------------------------------------------------------------------ validation

BAND = (0.8, 1.25)
"""Done-when band for predicted / published speedup (issue 14)."""
FLAT = 0.05
"""A published sweep whose last speedup is within ±5% of its first has no direction (that
is within run-to-run noise); a predicted trend's direction is the sign of its change."""


class Row(Strict):
    id: str
    role: str
    gpu: str
    engine: str
    target: str
    draft: str | None
    shape: str
    concurrency: int
    tau: float | None
    tau_anchored: bool
    published_speedup: float | None
    predicted_speedup: float | None
    ratio: float | None
    published_baseline: float | None
    predicted_baseline: float
    baseline_ratio: float | None
    params: str
    source: str


class SweepCheck(Strict):
    sweep: str
    concurrencies: list[int]
    published: list[float]
    predicted: list[float]
    published_direction: str
    predicted_direction: str
    ok: bool


class Evaluation(Strict):
    rows: list[Row]
    sweeps: list[SweepCheck]
    known_tau: int
    within_band: int
    held_out_known_tau: int
    held_out_within_band: int
    median_abs_error_pct: float
    worst_ratio: float
    worst_id: str
    baseline_median_abs_error_pct: float
    fits: list[Fitted]

    @property
    def share_within(self) -> float:
        return self.within_band / self.known_tau if self.known_tau else 0.0

    @property
    def sweeps_ok(self) -> bool:
        return all(s.ok for s in self.sweeps)

    @property
    def passes(self) -> bool:
        return self.share_within >= 0.8 and self.sweeps_ok


def _chosen(fits: list[Fitted], family: str, engine: str) -> tuple[StepParams, str]:
    for f in fits:
        if f.family == family and f.engine == engine:
            return f.params, f"{family} × {engine}"
    for f in fits:
        if f.engine == engine:
            return f.params, f"{f.family} × {engine} (borrowed)"
    return UNCALIBRATED, "uncalibrated"


def _anchor_tau(point: Point, published: float, params: StepParams,
                data: CalibrationData) -> float:
    """The τ at which the model reproduces a published speedup (sweeps without τ)."""
    target = data.models[point.target].forward(point.tp)
    draft = data.models[point.draft].forward(point.tp) if point.draft else None
    t = step_times(target, draft, point.shape, point.concurrency, point.context,
                   hardware_of(point.gpu), params)
    return published * (t.draft + t.verify) / (t.decode - published * t.per_token)


def _direction(first: float, last: float, band: float = FLAT) -> str:
    change = last / first - 1
    return "flat" if abs(change) <= band else ("rising" if change > 0 else "falling")


def _shape_text(p: Point) -> str:
    if p.method is None:
        return "baseline only"
    if p.num_steps is not None:
        return f"{p.method} {p.num_steps}/{p.topk}/{p.num_draft_tokens}"
    if p.block_size is not None:
        return f"{p.method} block {p.block_size}"
    return f"{p.method} k={p.num_speculative_tokens}"


def evaluate(data: CalibrationData | None = None,
             fits: list[Fitted] | None = None) -> Evaluation:
    data = data or load()
    fits = data.fitted if fits is None else fits
    anchors: dict[str, float] = {}
    rows: list[Row] = []
    for pt in sorted(data.points, key=lambda p: (p.sweep or p.id, p.concurrency, p.id)):
        params, label = _chosen(fits, family_of(pt.gpu), pt.engine)
        published = pt.published_speedup
        tau = None
        if pt.tau is None and pt.sweep and published is not None and pt.method:
            if pt.sweep not in anchors:  # the sweep's lowest concurrency anchors its τ
                anchors[pt.sweep] = _anchor_tau(pt, published, params, data)
            tau = anchors[pt.sweep]
        pred = predict(pt, params, data, tau)
        ratio = pred.speedup / published if pred.speedup and published else None
        rows.append(Row(
            id=pt.id, role=pt.role, gpu=pt.gpu, engine=f"{pt.engine} {pt.engine_version}",
            target=pt.target, draft=pt.draft, shape=_shape_text(pt),
            concurrency=pt.concurrency, tau=pred.tau_used, tau_anchored=pred.tau_anchored,
            published_speedup=published, predicted_speedup=pred.speedup, ratio=ratio,
            published_baseline=pt.baseline_tok_s, predicted_baseline=pred.baseline_tok_s,
            baseline_ratio=pred.baseline_tok_s / pt.baseline_tok_s if pt.baseline_tok_s
            else None, params=label, source=pt.source))
    known = [r for r in rows if r.ratio is not None and not r.tau_anchored]
    held = [r for r in known if r.role == "validate"]

    def inside(r: Row) -> bool:
        return r.ratio is not None and BAND[0] <= r.ratio <= BAND[1]

    errors = sorted(abs(r.ratio - 1) for r in known if r.ratio is not None)
    worst = max(known, key=lambda r: abs(math.log(r.ratio or 1.0)))
    base_errors = sorted(abs(r.baseline_ratio - 1) for r in rows if r.baseline_ratio)
    sweeps = []
    names = sorted({r_pt.sweep for r_pt in data.points if r_pt.sweep})
    for name in names:
        members = sorted((r for r in rows if any(p.id == r.id and p.sweep == name
                                                   for p in data.points)
                          and r.ratio is not None), key=lambda r: r.concurrency)
        if len(members) < 2:
            continue
        pub = [m.published_speedup or 0.0 for m in members]
        pre = [m.predicted_speedup or 0.0 for m in members]
        pub_dir = _direction(pub[0], pub[-1])
        pre_dir = _direction(pre[0], pre[-1], band=0.0)
        sweeps.append(SweepCheck(
            sweep=name, concurrencies=[m.concurrency for m in members],
            published=[round(x, 3) for x in pub], predicted=[round(x, 3) for x in pre],
            published_direction=pub_dir, predicted_direction=pre_dir,
            ok=pub_dir == "flat" or pre_dir == pub_dir))
    return Evaluation(
        rows=rows, sweeps=sweeps, known_tau=len(known),
        within_band=sum(1 for r in known if inside(r)), held_out_known_tau=len(held),
        held_out_within_band=sum(1 for r in held if inside(r)),
        median_abs_error_pct=round(100 * _median(errors), 1),
        worst_ratio=round(worst.ratio or 1.0, 3), worst_id=worst.id,
        baseline_median_abs_error_pct=round(100 * _median(base_errors), 1), fits=fits)


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def fits_yaml(fits: list[Fitted]) -> str:
    """The `fitted:` block of data/calibration.yaml, as `--refit --write` stores it."""
    lines = ["fitted:"]
    for f in fits:
        lines.append(f"  - family: {f.family}")
        lines.append(f"    engine: {f.engine}")
        lines.append("    params: {" + ", ".join(
            f"{k}: {v:.4g}" for k, v in f.params.model_dump().items()) + "}")
        lines.append("    fitted_on: [" + ", ".join(f.fitted_on) + "]")
    return "\n".join(lines) + "\n"


def write_fits(fits: list[Fitted]) -> None:
    path = Path(str(resources.files("specpair").joinpath("data/calibration.yaml")))
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:text.index("\nfitted:") + 1] + fits_yaml(fits), encoding="utf-8")
    load.cache_clear()
