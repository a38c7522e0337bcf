"""`specpair slo propose`: the acceptance SLO from the service's own traffic.

Two sources, one rule. The SLO is set at the runbook's scope and percentile: the
measured percentile of τ, its bootstrap 95% interval, and the SLO is the interval's low
end less a stated margin (rounded down to 0.01), so that a percentile that drifts within
its own uncertainty does not page anyone.

- A replay record (`specpair bench` with `kind: replay` workloads): the engine's
  per-request τ of the pair's answers, all replay cells and classes pooled (per-class
  figures are shown beside it). That is the `per_request` scope.
- A Prometheus server's history of the pair's recording rule
  `specpair:acceptance_length:rate5m` (generated in prometheus-rules.yaml): τ of all
  requests over 5-minute windows, i.e. the `per_batch` scope. The windows overlap and
  follow each other, so the interval is that of the sampled evaluations, narrower than
  independent samples would give: a longer `--since` is the remedy, and it is said.

`--write` makes the edit with the planner's runbook editor (`specpair.load.runbook_edit`):
min_length, `basis: own_traffic` and the provenance (source, reference, time range,
samples, value, interval, margin). The gate (SP702) accepts `own_traffic` only with it.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from pydantic import BaseModel, ValidationError

from specpair.analyse.acceptance import shape_depth
from specpair.bench.record import Measurement
from specpair.bench.stats import percentile
from specpair.bench.traffic import bootstrap
from specpair.load.bounded_http import AnswerRefused, Limits, client, redact
from specpair.load.document import bounded_json
from specpair.load.runbook_edit import Change
from specpair.model.common import inert
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair

RECORD_RULE = "specpair:acceptance_length:rate5m"
DEFAULT_MARGIN = 0.05
MAX_POINTS = 10_000  # Prometheus refuses more than 11,000 points per series
MAX_ANSWER_POINTS = 200_000
"""Points a proposal bootstraps over (a few replicas' series at MAX_POINTS each): a
million points made the bootstrap run for minutes."""
PROMETHEUS_LIMITS = Limits(deadline_s=60.0, max_bytes=64 << 20)
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True)
class Proposal:
    scope: str
    percentile: int
    source: str               # record | prometheus
    reference: str            # record file name, or the PromQL expression
    start: str
    end: str
    samples: int
    value: float
    interval: tuple[float, float]
    margin: float
    min_length: float
    break_even: float | None
    break_even_note: str
    per_class: dict[str, tuple[int, float, tuple[float, float]]] = field(default_factory=dict)
    caveat: str = ""

    @property
    def clears_break_even(self) -> bool | None:
        if self.break_even is None:
            return None
        from specpair.analyse.latency import SLO_MARGIN

        return self.min_length >= self.break_even * (1 + SLO_MARGIN)


def duration(text: str) -> int:
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise SpecpairError.single("--since", f"{text!r} is not a duration",
                                   "a whole number and a unit: 90m, 6h, 7d, 2w")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _slo_value(low: float, margin: float) -> float:
    # rounded first: 3.0 × 0.95 is 2.8499999… in binary, and the SLO is 2.85
    return max(1.0, math.floor(round(low * (1 - margin) * 100, 9)) / 100)


def break_even(pair: ResolvedPair) -> tuple[float | None, str]:
    """τ* at the runbook's concurrency, from the pair's latency model, or why not."""
    from specpair.analyse.budget import compute
    from specpair.analyse.latency import SLO_MARGIN, model

    try:
        here = model(pair, compute(pair)).at_concurrency
    except SpecpairError as exc:
        return None, f"no break-even: {exc.problems[0].message}"
    return here.break_even, (f"break-even τ* {here.break_even:.2f} at concurrency "
                             f"{here.concurrency}; the SLO must reach τ*·(1+{SLO_MARGIN:g})")


def _physical(pair: ResolvedPair, values: list[float], where: str, cause: str) -> None:
    """τ counts the bonus token and at most the draft's depth: one above 1 + depth is no
    measurement of this pair, and an SLO proposed from it could never be met."""
    most = 1 + shape_depth(pair)
    beyond = [v for v in values if v > most + 1e-9]
    if beyond:
        raise SpecpairError.single(
            where, f"{len(beyond)} τ value(s) above {most}, the most a step of this pair's "
            f"draft can yield (1 + depth {most - 1}), up to {max(beyond):.3g}",
            f"{cause}: measure the pair as the runbook launches it")


def from_record(pair: ResolvedPair, record: Measurement, name: str,
                margin: float = DEFAULT_MARGIN) -> Proposal:
    slo = pair.runbook.acceptance.slo
    where = f"measurements/{name}"
    if slo.scope != "per_request":
        raise SpecpairError.single(
            where, f"a replay record holds τ per request; the runbook's SLO is {slo.scope}",
            "propose a per_batch SLO from Prometheus (--prometheus URL --since 7d)")
    values: list[float] = []
    by_class: dict[str, list[float]] = {}
    for cell in record.cells:
        if cell.replay is None:
            continue
        for o in cell.replay.speculative.requests:
            if o.error is None and o.tau is not None:
                values.append(o.tau)
                by_class.setdefault(o.label, []).append(o.tau)
    _physical(pair, values, where, "the record was not made with this pair's draft")
    if not values:
        raise SpecpairError.single(
            where, "the record has no per-request τ of a replay workload",
            "add a `kind: replay` workload with your captured requests and run "
            "`specpair bench` (vLLM and SGLang report τ per request)")
    value = percentile(values, slo.percentile)
    assert value is not None
    interval = bootstrap(values, slo.percentile)
    per_class = {}
    for label, vs in sorted(by_class.items()):
        v = percentile(vs, slo.percentile)
        assert v is not None
        per_class[label] = (len(vs), v, bootstrap(vs, slo.percentile))
    even, note = break_even(pair)
    stamp = name.removesuffix(".json")
    try:
        end = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        end = record.started_at
    return Proposal(scope=slo.scope, percentile=slo.percentile, source="record",
                    reference=name, start=record.started_at, end=end, samples=len(values),
                    value=value, interval=interval, margin=margin,
                    min_length=_slo_value(interval[0], margin), break_even=even,
                    break_even_note=note, per_class=per_class)


def from_prometheus(pair: ResolvedPair, url: str, since_s: int,
                    margin: float = DEFAULT_MARGIN, now: float | None = None) -> Proposal:
    slo = pair.runbook.acceptance.slo
    expr = f'{RECORD_RULE}{{specpair_pair="{pair.name}"}}'
    if slo.scope != "per_batch":
        raise SpecpairError.single(
            url, f"{RECORD_RULE} is τ of all requests over 5-minute windows (scope "
            f"per_batch); the runbook's SLO is {slo.scope}",
            "propose a per_request SLO from a replay record, or set acceptance.slo.scope: "
            "per_batch")
    end = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    start = end - since_s
    step = max(1, math.ceil(since_s / MAX_POINTS))
    query = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}",
                                    "end": f"{end:.3f}", "step": f"{step}s"})
    shown = redact(url)
    values = [v for v in _query_range(url, shown, query) if math.isfinite(v) and v >= 1]
    _physical(pair, values, shown, f"{expr} does not describe this pair's draft")
    if not values:
        raise SpecpairError.single(
            url, f"no data for {expr} over the last {since_s}s",
            "load the pair's prometheus-rules.yaml and relabel the engine's series with "
            "specpair_pair (the generated PodMonitor does), then wait for traffic")
    value = percentile(values, slo.percentile)
    assert value is not None
    interval = bootstrap(values, slo.percentile)
    even, note = break_even(pair)

    def iso(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    return Proposal(scope=slo.scope, percentile=slo.percentile, source="prometheus",
                    reference=expr, start=iso(start), end=iso(end), samples=len(values),
                    value=value, interval=interval, margin=margin,
                    min_length=_slo_value(interval[0], margin), break_even=even,
                    break_even_note=note,
                    caveat=f"evaluations every {step}s of overlapping 5-minute windows: "
                           "the interval is that of correlated samples; a longer --since "
                           "widens what it covers")


class _Series(BaseModel):
    values: list[tuple[float, str]]


class _Data(BaseModel):
    result: list[_Series]


class _Answer(BaseModel):
    """The part of Prometheus' query_range answer the proposal reads (its HTTP API)."""

    status: str
    data: _Data | None = None
    error: str | None = None


def _query_range(url: str, shown: str, query: str) -> list[float]:
    """The values of one range query, every answer bounded (`load.bounded_http`): a
    deadline, a size, at most MAX_ANSWER_POINTS points; anything else a located error."""
    hint = "check the URL (the server's address, no path) and that it is Prometheus"
    try:
        with client(httpx, PROMETHEUS_LIMITS) as http:
            response = http.get(f"{url}/api/v1/query_range?{query}")
            text = response.text
    except AnswerRefused as exc:
        raise SpecpairError.single(shown, f"Prometheus: {exc.reason}", hint) from None
    except httpx.HTTPError as exc:
        raise SpecpairError.single(shown, f"cannot query Prometheus: {type(exc).__name__}",
                                   hint) from None
    try:  # three values a point: [time, "value"]
        answer = _Answer.model_validate(bounded_json(text, 4 * MAX_ANSWER_POINTS + 1000))
    except ValidationError as exc:
        raise SpecpairError.single(shown, f"Prometheus answered {response.status_code} with "
                                   f"no query_range answer ({exc.error_count()} field(s) of "
                                   "another shape)", hint) from None
    except ValueError as exc:  # bounded_json's reasons never quote the answer
        raise SpecpairError.single(shown, f"Prometheus answered {response.status_code} with "
                                   f"no query_range answer ({str(exc)[:120]})", hint) from None
    if response.status_code != 200 or answer.status != "success" or answer.data is None:
        raise SpecpairError.single(shown, f"Prometheus answered {response.status_code}: "
                                   f"{inert(str(answer.error or ''))[:200]}", "check the query")
    points = sum(len(series.values) for series in answer.data.result)
    if points > MAX_ANSWER_POINTS:
        raise SpecpairError.single(shown, f"Prometheus answered {points:,} points; the "
                                   f"proposal reads at most {MAX_ANSWER_POINTS:,}",
                                   "is specpair_pair set on one series per replica? a "
                                   "shorter --since gives fewer")
    try:
        return [float(v) for series in answer.data.result for _, v in series.values]
    except ValueError:
        raise SpecpairError.single(shown, "Prometheus answered a value that is not a number",
                                   hint) from None


def changes(p: Proposal) -> list[Change]:
    base = ("acceptance", "slo")
    prov = (*base, "provenance")
    return [Change((*base, "min_length"), p.min_length), Change((*base, "basis"), "own_traffic"),
            Change((*prov, "source"), p.source), Change((*prov, "reference"), p.reference),
            Change((*prov, "start"), p.start), Change((*prov, "end"), p.end),
            Change((*prov, "samples"), p.samples), Change((*prov, "value"), p.value),
            Change((*prov, "interval_low"), p.interval[0]),
            Change((*prov, "interval_high"), p.interval[1]),
            Change((*prov, "margin"), p.margin)]


def report(p: Proposal) -> str:
    lo, hi = p.interval
    clears = p.clears_break_even
    lines = [f"SLO proposal ({p.scope}, p{p.percentile}) from {p.source} {p.reference}",
             f"  traffic: {p.start} to {p.end}, {p.samples} samples",
             f"  p{p.percentile} τ = {p.value:.3f}, 95% interval [{lo:.3f}, {hi:.3f}]",
             f"  proposed min_length {p.min_length:.2f} (interval low less {p.margin:.0%})",
             f"  {p.break_even_note}: "
             + ("clears it" if clears else "does NOT clear it" if clears is False
                else "unknown")]
    lines += [f"  class {label}: n={n}, p{p.percentile} τ = {v:.3f} [{a:.3f}, {b:.3f}]"
              for label, (n, v, (a, b)) in p.per_class.items()]
    if p.caveat:
        lines.append(f"  note: {p.caveat}")
    return "\n".join(lines) + "\n"


def latest_record(folder: Path) -> tuple[Measurement, str]:
    from specpair.load.runbooks import latest_measurement_file

    found = latest_measurement_file(folder)
    if found is None:
        raise SpecpairError.single(folder, "the pair has no bench record",
                                   "run `specpair bench` with a replay workload first")
    path, record = found
    return record, path.name


def write(p: Proposal, path: Path, display: str) -> int:
    """Edit the runbook in place (the planner's editor: every other byte kept, the result
    verified). An SLO below break-even is written as measured, with a warning: the gate's
    SP701 is where it fails. Returns the exit status."""
    from specpair.load.runbook_edit import plan_edit
    from specpair.write.runbook_edit import write_edit

    result = plan_edit(path, display, changes(p))
    if not result.applied:
        print("not written: " + "; ".join(result.reasons) + "\n" + result.diff)
        return 1
    write_edit(result)
    print(result.diff, end="")
    print(f"{display}: acceptance.slo set from {p.source} {p.reference}")
    if p.clears_break_even is False:  # written as measured; SP701 fails the gate on it
        print(f"warning: the SLO {p.min_length:.2f} does not clear break-even "
              f"({p.break_even_note}): on this traffic the pair does not pay "
              "(`specpair check` reports SP701)")
    return 0
