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
from collections.abc import Iterable

from pydantic import Field

from specpair import calibration
from specpair.bench.record import Cell, Measurement
from specpair.budget.model import Budget
from specpair.resolve import ResolvedPair
from specpair.schema.common import Strict
from specpair.stepmodel import StepParams, fit, step_times


class CellFit(Strict):
    workload: str
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


def _usable(cell: Cell) -> bool:
    b, s = cell.baseline, cell.speculative
    return (b.failed == 0 and s.failed == 0 and b.output_throughput > 0
            and s.output_throughput > 0 and (s.acceptance_aggregate or 0) >= 1)


def fit_pair(pair: ResolvedPair, budget: Budget, record: Measurement,
             concurrencies: Iterable[int] | None = None) -> PairFit | None:
    """Fit on the record's cells at `concurrencies` (default: all); None without usable
    cells. Every cell is predicted, fitted on or not."""
    from specpair import latency

    cells = [c for c in record.cells if _usable(c)]
    chosen = sorted(set(concurrencies) if concurrencies is not None
                    else {c.concurrency for c in cells})
    train = [c for c in cells if c.concurrency in chosen]
    if not train:
        return None
    start = latency.parameters(pair.model_copy(update={"measurement": None}), budget).values
    # start from the measured plain step at the lowest concurrency: the published fit can
    # be orders of magnitude off for another machine, and the simplex moves in log steps
    low = min(train, key=lambda c: c.concurrency)
    step = low.concurrency / low.baseline.output_throughput
    start = start.model_copy(update={"forward_s": step / 2, "speculative_s": step / 4,
                                     "draft_s": step / 4, "token_s": step / 4})
    contexts = {w.name: max(1, round(latency.workload_context(w)))
                for w in pair.runbook.workloads}

    def predicted(p: StepParams, cell: Cell) -> tuple[float, float, float]:
        s = latency.setup(pair, budget, p)
        tau = cell.speculative.acceptance_aggregate or 1.0
        t = step_times(s.target, s.draft, s.shape, cell.concurrency,
                       contexts.get(cell.workload, s.context), s.hw, p)
        b = cell.concurrency
        return b / t.decode, b * tau / t.speculative(tau), tau

    def loss(p: StepParams) -> float:
        total = 0.0
        for cell in train:
            base, spec, _ = predicted(p, cell)
            total += math.log(base / cell.baseline.output_throughput) ** 2
            total += math.log(spec / cell.speculative.output_throughput) ** 2
        return total

    free = ["eta_bw", "eta_flops", "forward_s", "speculative_s", "draft_s"]
    if len(chosen) > 1:
        free.append("token_s")
    params = fit(loss, start, free)
    rows = []
    for cell in cells:
        base, spec, tau = predicted(params, cell)
        rows.append(CellFit(workload=cell.workload, concurrency=cell.concurrency, tau=tau,
                            baseline_measured=cell.baseline.output_throughput,
                            baseline_predicted=round(base, 3),
                            speculative_measured=cell.speculative.output_throughput,
                            speculative_predicted=round(spec, 3),
                            fitted_on=cell.concurrency in chosen))
    provenance = (f"fitted on this pair's bench record of {record.started_at} "
                  f"({len(train)} cells at concurrency {', '.join(map(str, chosen))}; "
                  f"engine {record.protocol.engine}), starting from: "
                  + calibration.params_for(pair.gpu_spec.family,
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
