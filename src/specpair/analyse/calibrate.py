"""Fit a pair's step costs on its own `specpair bench` records (`specpair calibrate`).

A record holds, per workload and concurrency, the measured baseline and speculative
output throughput and the measured τ. With the pair's geometry those give the time of a
plain decode step (B / baseline throughput) and of a speculative step (B · τ /
speculative throughput); the step model's fixed costs (per forward, per speculative step,
per draft forward, per output token) are fitted to them, starting from the published fit
for the GPU family × engine. Break-even then uses these values, labelled with the record.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import Field

from specpair.analyse import calibrated_params, step_inputs
from specpair.analyse.step_params import RECORD_BOUNDS, StepParams, fit_bounded
from specpair.analyse.stepmodel import step_times
from specpair.bench.record import Cell, Measurement
from specpair.model.budget import Budget
from specpair.model.common import Strict
from specpair.resolve.pair import ResolvedPair


class CellFit(Strict):
    workload: str = Field(description="the workloads pooled at this concurrency")
    concurrency: int
    tau: float
    baseline_measured: float
    baseline_predicted: float
    speculative_measured: float
    speculative_predicted: float
    fitted_on: bool


class PairFit(Strict):
    params: StepParams
    provenance: str
    record: str = Field(description="started_at of the record fitted on")
    concurrencies: list[int] = Field(description="concurrencies the fit used")
    cells: list[CellFit]


@dataclass(frozen=True)
class Operating:
    """One concurrency of a record, its workloads pooled: tokens over wall time (so a slow
    stretch of a shared host weighs by how long it lasted), τ and context token-weighted."""

    concurrency: int
    workloads: str
    baseline: float
    speculative: float
    tau: float
    context: float


def _usable(cell: Cell) -> bool:
    b, s = cell.baseline, cell.speculative
    return (b.failed == 0 and s.failed == 0 and b.output_tokens > 0 and b.wall_s > 0
            and s.output_tokens > 0 and s.wall_s > 0 and (s.acceptance_aggregate or 0) >= 1)


def operating_points(pair: ResolvedPair, record: Measurement) -> list[Operating]:
    contexts = {w.name: c for w in pair.runbook.workloads
                if (c := step_inputs.workload_context(w)) is not None}
    fallback = step_inputs.expected_context(pair)[0]
    by_c: dict[int, list[Cell]] = {}
    for cell in record.cells:
        if _usable(cell):
            by_c.setdefault(cell.concurrency, []).append(cell)
    out = []
    for c, cells in sorted(by_c.items()):
        spec_tokens = sum(x.speculative.output_tokens for x in cells)
        out.append(Operating(
            concurrency=c, workloads=", ".join(x.workload for x in cells),
            baseline=sum(x.baseline.output_tokens for x in cells)
            / sum(x.baseline.wall_s for x in cells),
            speculative=spec_tokens / sum(x.speculative.wall_s for x in cells),
            tau=sum((x.speculative.acceptance_aggregate or 1.0) * x.speculative.output_tokens
                    for x in cells) / spec_tokens,
            context=sum(contexts.get(x.workload, fallback) * x.speculative.output_tokens
                        for x in cells) / spec_tokens))
    return out


def fit_pair(pair: ResolvedPair, budget: Budget, record: Measurement,
             concurrencies: Iterable[int] | None = None) -> PairFit | None:
    """Fit on the record's operating points at `concurrencies` (default: all); None
    without usable cells. Every operating point is predicted, fitted on or not."""
    points = operating_points(pair, record)
    chosen = sorted(set(concurrencies) if concurrencies is not None
                    else {p.concurrency for p in points})
    train = [p for p in points if p.concurrency in chosen]
    if not train:
        return None
    start = step_inputs.published_parameters(pair).values
    # start from the measured plain step at the lowest concurrency: the published fit can
    # be orders of magnitude off for another machine, and the simplex moves in log steps
    step = train[0].concurrency / train[0].baseline
    start = start.model_copy(update={"forward_s": step / 2, "speculative_s": step / 4,
                                     "draft_s": step / 4, "token_s": step / 4})
    setup = step_inputs.setup_with(pair, budget, start)

    def predicted(p: StepParams, op: Operating) -> tuple[float, float]:
        t = step_times(setup.target, setup.draft, setup.shape, op.concurrency,
                       round(op.context), setup.hw, p)
        return op.concurrency / t.decode, op.concurrency * op.tau / t.speculative(op.tau)

    def residuals(values: Mapping[str, float]) -> list[float]:
        p = StepParams.model_validate(values)
        out = []
        for op in train:
            base, spec = predicted(p, op)
            out += [math.log(base / op.baseline), math.log(spec / op.speculative)]
        return out

    free = ["eta_bw", "eta_flops", "forward_s", "speculative_s", "draft_s"]
    if len(chosen) > 1:
        free.append("token_s")
    # the pair's own machine: wide bounds, and only a faint pull to the published start
    result = fit_bounded(residuals, start.model_dump(), free, prior_weight=0.01,
                         bounds=RECORD_BOUNDS)
    params = StepParams.model_validate(result.values)
    rows = []
    for op in points:
        base, spec = predicted(params, op)
        rows.append(CellFit(workload=op.workloads, concurrency=op.concurrency,
                            tau=round(op.tau, 4), baseline_measured=round(op.baseline, 3),
                            baseline_predicted=round(base, 3),
                            speculative_measured=round(op.speculative, 3),
                            speculative_predicted=round(spec, 3),
                            fitted_on=op.concurrency in chosen))
    provenance = (f"fitted on this pair's bench record of {record.started_at} "
                  f"(concurrency {', '.join(map(str, chosen))}, workloads pooled; "
                  f"engine {record.protocol.engine}), starting from: "
                  + calibrated_params.params_for(pair.gpu_spec.family,
                                                 pair.runbook.engine.name.value).provenance)
    return PairFit(params=params, provenance=provenance, record=record.started_at,
                   concurrencies=chosen, cells=rows)


def markdown(f: PairFit) -> str:
    rows = [[c.workload, str(c.concurrency), f"{c.tau:.2f}",
             f"{c.baseline_measured:.1f}", f"{c.baseline_predicted:.1f}",
             f"{c.speculative_measured:.1f}", f"{c.speculative_predicted:.1f}",
             f"{(c.speculative_measured / c.baseline_measured):.2f}",
             f"{(c.speculative_predicted / c.baseline_predicted):.2f}",
             "fit" if c.fitted_on else "predicted"] for c in f.cells]
    head = ["workload", "concurrency", "τ", "baseline tok/s", "predicted", "speculative tok/s",
            "predicted", "speedup", "predicted", "cell"]
    lines = [f"Step costs: {f.params.describe()}\n", f"Provenance: {f.provenance}\n\n",
             "| " + " | ".join(head) + " |\n", "|" + "---|" * len(head) + "\n"]
    lines += ["| " + " | ".join(r) + " |\n" for r in rows]
    return "".join(lines)
