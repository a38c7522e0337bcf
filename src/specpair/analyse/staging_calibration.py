"""Recorded cold starts against the staging model: the comparison per phase, and the
staging assumptions calibrated from the records.

The comparison reads the latest record; calibration reads every completed one. Each
calibrated value names the records it came from and how it was derived (its
provenance), the way the latency dial's calibration names its measurements. Starts that
failed are never used; neither are downloads served from a warm cache (fetched bytes
below the artifact's bytes), which time the disk, not the network.

Calibrated values are suggestions for the runbook's `staging:` section: the generated
plan keeps the authored assumptions, so measured against modelled stays a real check.
"""

from __future__ import annotations

import statistics

from pydantic import Field

from specpair.analyse.staging import StagingPlan, plan
from specpair.engines.logs_model import KV_CAPACITY_KEY
from specpair.load.staging_log import PHASES, STAGING_DIR, StagingRecord, file_name
from specpair.model.common import Strict
from specpair.resolve.pair import ResolvedPair


class PhaseRow(Strict):
    phase: str
    modelled_s: float | None
    measured_s: float | None
    status: str
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.modelled_s and self.measured_s is not None:
            return round(self.measured_s / self.modelled_s, 2)
        return None


class Comparison(Strict):
    record: str = Field(description="the record, relative to the pair folder")
    started_at: str
    host: str
    status: str
    failed_phase: str | None
    dominant_phase: str | None
    rows: list[PhaseRow]
    modelled_total_s: float
    measured_total_s: float
    budget_s: float
    fits: bool


def record_path(record: StagingRecord) -> str:
    return str(STAGING_DIR / file_name(record))


def compare(pair: ResolvedPair, staging: StagingPlan, record: StagingRecord) -> Comparison:
    """Measured against modelled, phase by phase, with the engine's own sub-phases and
    each artifact's download."""
    by_phase: dict[str, float] = {}
    for step in staging.steps:
        by_phase[step.phase] = round(by_phase.get(step.phase, 0.0) + step.seconds, 1)
    st = pair.runbook.staging
    rows: list[PhaseRow] = []
    for name in PHASES:
        measured = record.phase(name)
        rows.append(PhaseRow(phase=name, modelled_s=by_phase.get(name),
                             measured_s=measured.seconds if measured else None,
                             status=measured.status if measured else "not reached",
                             note=(measured.error or "") if measured else ""))
        if name == "staging":
            streams = max(1, len(record.artifacts)) if record.mode == "parallel-prestage" \
                else 1
            per_stream = min(st.stream_bandwidth_bytes_per_s,
                             st.network_bandwidth_bytes_per_s / streams)
            for a in record.artifacts:
                cached = a.fetched_bytes < a.bytes
                rows.append(PhaseRow(
                    phase=f"  stage {a.artifact}",
                    modelled_s=round(a.bytes / per_stream, 1) if a.source == "hub" else None,
                    measured_s=a.seconds, status=a.status,
                    note=(a.error or "") or f"{a.bytes:,} B" + (" (warm cache)" if cached
                                                                else "")))
        if name == "engine_start" and measured is not None and measured.detail:
            modelled = {s.name: s.seconds for s in staging.steps}
            for key, label, step_name in (("weight_load_s", "weight load", "load weights"),
                                          ("graph_capture_s", "graph capture",
                                           "capture CUDA graphs")):
                if key in measured.detail:
                    rows.append(PhaseRow(phase=f"  {label} (engine log)",
                                         modelled_s=modelled.get(step_name),
                                         measured_s=measured.detail[key], status="ok"))
            if KV_CAPACITY_KEY in measured.detail:  # a count, not seconds
                rows.append(PhaseRow(
                    phase="  KV capacity (engine log)", modelled_s=None, measured_s=None,
                    status="ok", note=f"{int(measured.detail[KV_CAPACITY_KEY]):,} tokens, "
                    "as the engine sized its KV cache at this start (budget.md uses it "
                    "where the engine measures that size)"))
    budget = st.cold_start_budget_s
    return Comparison(
        record=record_path(record), started_at=record.started_at, host=record.host,
        status=record.status, failed_phase=record.failed_phase,
        dominant_phase=record.dominant_phase, rows=rows,
        modelled_total_s=staging.cold_start_s, measured_total_s=record.total_s,
        budget_s=budget, fits=record.status == "ok" and record.total_s <= budget)


def measured_cold_start(pair: ResolvedPair, staging: StagingPlan) -> list[tuple[str, str, str]]:
    """SP802 on the latest recorded start: (message, field, hint) when it failed or took
    longer than the budget. Each message says that it is the measured cold start."""
    c = compare(pair, staging, pair.staging_records[-1])
    hint = f"see {c.record} and the measured table in staging.md"
    if c.status == "failed":
        return [(f"the latest recorded start ({c.started_at}) failed in {c.failed_phase} "
                 f"after {c.measured_total_s:g} s; the model says {c.modelled_total_s:g} s",
                 "staging", hint)]
    if not c.fits:
        return [(f"measured cold start {c.measured_total_s:g} s (recorded {c.started_at}) "
                 f"over the budget of {c.budget_s:g} s; longest phase {c.dominant_phase}; "
                 f"the model says {c.modelled_total_s:g} s", "staging.cold_start_budget_s",
                 hint)]
    return []


class Calibrated(Strict):
    key: str = Field(description="the runbook field under staging:")
    value: float
    assumed: float = Field(description="the runbook's value now")
    points: int
    method: str
    records: list[str]


class StagingCalibration(Strict):
    parameters: list[Calibrated]
    used: list[str] = Field(description="records that completed")
    excluded: dict[str, str] = Field(description="record → why it was not used")
    calibrated_cold_start_s: float = Field(
        description="the model's cold start with the calibrated values")


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def calibrate(pair: ResolvedPair) -> StagingCalibration | None:
    """The staging assumptions the recorded starts support, or None without records."""
    records = pair.staging_records
    if not records:
        return None
    st = pair.runbook.staging
    used = [r for r in records if r.status == "ok"]
    excluded = {record_path(r): f"failed in {r.failed_phase}" for r in records
                if r.status != "ok"}
    found: list[Calibrated] = []

    def add(key: str, points: list[tuple[float, StagingRecord]], method: str,
            digits: int = 1) -> None:
        if points:
            found.append(Calibrated(
                key=key, value=round(_median([v for v, _ in points]), digits),
                assumed=float(getattr(st, key)), points=len(points), method=method,
                records=sorted({record_path(r) for _, r in points})))

    add("stream_bandwidth_bytes_per_s",
        [(a.bytes / a.seconds, r) for r in used for a in r.artifacts
         if a.source == "hub" and a.bytes > 0 and a.fetched_bytes >= a.bytes and a.seconds > 0],
        "median of bytes / seconds per downloaded artifact (cold cache only; parallel "
        "streams that shared the link count as they ran)", 0)
    add("network_bandwidth_bytes_per_s",
        [(sum(a.fetched_bytes for a in r.artifacts) / p.seconds, r) for r in used
         if r.mode == "parallel-prestage" and len(r.artifacts) > 1
         and all(a.source == "hub" and a.fetched_bytes >= a.bytes > 0 for a in r.artifacts)
         and (p := r.phase("staging")) is not None and p.seconds > 0],
        "median of all bytes / staging seconds with both artifacts downloading at once "
        "(what the link gave; a lower bound on its capacity)", 0)
    add("storage_bandwidth_bytes_per_s",
        [(sum(a.bytes for a in r.artifacts) / p.detail["weight_load_s"], r) for r in used
         if (p := r.phase("engine_start")) is not None
         and p.detail.get("weight_load_s", 0) > 0 and sum(a.bytes for a in r.artifacts) > 0],
        "median of staged bytes / the weight-load seconds the engine logged", 0)
    add("graph_capture_s",
        [(p.detail.get("graph_capture_s", 0.0), r) for r in used
         if (p := r.phase("engine_start")) is not None and p.detail],
        "median of the graph-capture seconds the engine logged (none logged: no capture)")
    modelled_load = {s.name: s.seconds for s in plan(pair).steps}

    def init_seconds(r: StagingRecord) -> float | None:
        p = r.phase("engine_start")
        if p is None:
            return None
        load = p.detail.get("weight_load_s", modelled_load.get("load weights", 0.0))
        capture = p.detail.get("graph_capture_s", 0.0 if p.detail else st.graph_capture_s)
        return max(0.0, p.seconds - load - capture)

    add("engine_init_s", [(v, r) for r in used if (v := init_seconds(r)) is not None],
        "median of launch → /health less weight load and graph capture (the engine's "
        "logged seconds where given, else the modelled ones)")
    add("warmup_s", [(p.seconds, r) for r in used if (p := r.phase("warmup")) is not None],
        "median of the warmup request's seconds", 2)
    values = {c.key: c.value for c in found}
    calibrated = pair.model_copy(update={"runbook": pair.runbook.model_copy(update={
        "staging": st.model_copy(update=values)})})
    return StagingCalibration(parameters=found, used=[record_path(r) for r in used],
                              excluded=excluded,
                              calibrated_cold_start_s=plan(calibrated).cold_start_s)
