"""The deployment log of a cold start, and the record `specpair staging ingest` keeps.

`stage-and-launch.sh` and the Kubernetes init container / warmup hook write one JSON line
per phase, each after a short human line (`--json` leaves the human lines out):

    {"log": "specpair.staging/1", "pair": …, "phase": "start", …}           once, first
    {"log": …, "phase": "stage", "artifact": "draft", "bytes": …, …}        per artifact
    {"log": …, "phase": "staging", "seconds": …}                            all downloads
    {"log": …, "phase": "engine_start", "seconds": …}                       launch → /health
    {"log": …, "phase": "warmup", "seconds": …}                             the warmup request
    {"log": …, "phase": "total", "seconds": …, "budget_s": …, "dominant": …} once, last

A failing phase writes its line with `"status": "failed"`, the error and the seconds it
ran, then the `total` line names it (`failed_phase`) and the script exits with that
phase's status (EXIT_STATUS). Only lines that parse as JSON objects with the `log` key
are read, so a log mixed with other output (`kubectl logs` of both containers, `tee`)
ingests as it is.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from specpair.model.common import PastUtcTime, Strict
from specpair.model.errors import Location, Problem, SpecpairError

LOG_FORMAT = "specpair.staging/1"
PHASES = ("staging", "engine_start", "warmup")
"""The phases a cold start is made of, in order; `stage` lines detail `staging`."""
EXIT_STATUS = {"staging": 3, "engine_start": 4, "warmup": 5}
"""Exit status of the script when a phase fails (2 is a usage error)."""
BASELINE_MARK = (f"{LOG_FORMAT} baseline launch: the pair was stopped; the target alone "
                 "starts below")
"""The line the generated script and server write into the engine's log before a canary
fallback starts the baseline launch there: what follows is a second engine start (the
target alone), whose weight load and KV capacity are not the pair's."""

Status = Literal["ok", "failed"]


class ArtifactStage(Strict):
    artifact: Literal["target", "draft"]
    source: Literal["hub", "local"]
    repo: str | None = None
    path: str | None = None
    revision: str | None = None
    commit: str | None = Field(default=None, description="the snapshot the hub resolved")
    bytes: int = Field(ge=0, description="bytes of the staged snapshot")
    fetched_bytes: int = Field(ge=0, description="bytes written during this run (not cached)")
    seconds: float = Field(ge=0)
    bytes_per_s: float | None = Field(default=None, ge=0, description="bytes / seconds")
    status: Status
    error: str | None = None


class PhaseResult(Strict):
    phase: Literal["staging", "engine_start", "warmup"]
    seconds: float = Field(ge=0)
    status: Status
    error: str | None = None
    detail: dict[str, float] = Field(
        default_factory=dict, description="sub-phases read from the engine's own log "
        "(seconds), and kv_capacity_tokens: the KV capacity the engine reported")


class StagingRecord(Strict):
    specpair_staging: int = 1
    pair: str
    started_at: PastUtcTime = Field(description="UTC time the script started")
    host: str
    mode: str
    engine: str
    budget_s: float
    artifacts: list[ArtifactStage]
    phases: list[PhaseResult]
    total_s: float = Field(description="start to the first completed request (or the failure)")
    status: Status
    failed_phase: str | None
    dominant_phase: str | None
    fits: bool = Field(description="a completed start within the cold-start budget")
    log_file: str = Field(description="the log this record was read from")

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.phase == name), None)


def _problem(display: str, line: int, message: str, hint: str) -> Problem:
    return Problem(Location(display, line, 0, "deployment log"), message, hint)


def read_lines(text: str, display: str) -> list[tuple[int, dict[str, Any]]]:
    """The log's JSON lines (1-based line numbers); other lines are skipped."""
    found = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        start = line.find('{"log"')
        if start < 0:
            continue
        try:
            data = json.loads(line[start:])
        except json.JSONDecodeError as exc:
            raise SpecpairError([_problem(display, number, f"a log line is not valid JSON "
                                          f"({exc.msg})", "ingest the log as the script "
                                          "wrote it; do not edit it")]) from None
        if isinstance(data, dict) and data.get("log") == LOG_FORMAT:
            found.append((number, data))
        elif isinstance(data, dict) and str(data.get("log", "")).startswith("specpair.staging/"):
            raise SpecpairError([_problem(display, number, f"log format {data['log']!r} is "
                                          f"not {LOG_FORMAT!r}", "regenerate the script with "
                                          "this specpair and start again")])
    return found


def _seconds(value: object) -> float:
    return round(float(value), 3) if isinstance(value, int | float | str) else 0.0


def parse(text: str, display: str) -> StagingRecord:
    """The record of one start, from the log the script (or the manifest) wrote."""
    lines = read_lines(text, display)
    if not lines:
        raise SpecpairError([_problem(display, 0, f"no {LOG_FORMAT} lines in the log",
                                      "give the stdout of stage-and-launch.sh or `kubectl "
                                      "logs` of the stage and server containers")])
    by_phase: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for number, data in lines:
        by_phase.setdefault(str(data.get("phase")), []).append((number, data))
    if "start" not in by_phase:
        raise SpecpairError([_problem(display, lines[0][0], "the log has no start line",
                                      "ingest the whole log, from its first line")])
    if "total" not in by_phase:
        raise SpecpairError([_problem(display, lines[-1][0], "the log has no total line: the "
                                      "start was cut off before it finished or failed",
                                      "ingest the log once the script printed its total "
                                      "line")])
    start = by_phase["start"][0][1]
    total = by_phase["total"][-1][1]
    pairs = {str(d.get("pair")) for _, d in lines}
    if len(pairs) > 1:
        raise SpecpairError([_problem(display, 0, "the log mixes pairs: " + ", ".join(
            sorted(pairs)), "ingest one deployment's log at a time")])
    try:
        artifacts = [ArtifactStage.model_validate(
            {k: v for k, v in d.items() if k not in ("log", "pair", "phase", "t")})
            for _, d in by_phase.get("stage", [])]
        phases = [PhaseResult(phase=name, seconds=_seconds(d.get("seconds")),
                              status=d.get("status", "ok"), error=d.get("error"))
                  for name in PHASES for _, d in by_phase.get(name, [])[-1:]]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise SpecpairError([_problem(display, 0, "a phase line is malformed: " + ".".join(
            str(p) for p in first["loc"]) + f": {first['msg']}",
            "ingest the log as the script wrote it")]) from None
    started = dt.datetime.fromtimestamp(float(start.get("started_unix", 0)), dt.UTC)
    status = "failed" if total.get("status") == "failed" else "ok"
    total_s = _seconds(total.get("seconds"))
    budget = float(start.get("budget_s", total.get("budget_s", 0)))
    return StagingRecord(
        pair=str(start.get("pair")), started_at=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        host=str(start.get("host", "")), mode=str(start.get("mode", "")),
        engine=str(start.get("engine", "")), budget_s=budget, artifacts=artifacts,
        phases=phases, total_s=total_s, status=status,
        failed_phase=total.get("failed_phase"), dominant_phase=dominant(phases),
        fits=status == "ok" and total_s <= budget, log_file=Path(display).name)


def dominant(phases: list[PhaseResult]) -> str | None:
    """The phase that took longest (ties: the earlier one)."""
    best = None
    for p in phases:
        if best is None or p.seconds > best.seconds:
            best = p
    return best.phase if best else None


def file_name(record: StagingRecord) -> str:
    """`<UTC start>.json`: one record per start, so ingesting a log again changes nothing."""
    return record.started_at.replace("-", "").replace(":", "") + ".json"


def rate(n: float | None) -> str:
    """Bytes per second for people: `812 MB/s`."""
    if n is None or not math.isfinite(n):
        return "–"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if n >= scale:
            return f"{n / scale:,.3g} {unit}"
    return f"{n:,.0f} B/s"


STAGING_DIR = Path("measurements") / "staging"
"""Records of starts, beside the measurement protocol's records (`<pair>/measurements/`)."""


def load_records(folder: Path) -> list[StagingRecord]:
    """Every staging record of a pair folder, oldest first by the start each holds (not by
    name: `load.record_files`)."""
    from specpair.load.record_files import by_start, record_paths
    from specpair.load.runbooks import load_record

    records = [(path, load_record(path, StagingRecord))
               for path in record_paths(folder / STAGING_DIR)]
    return [record for _, record in by_start(records, lambda r: r.started_at)]


def check_belongs(record: StagingRecord, runbook: Any, display: str) -> None:
    """A record describes this pair's pinned artifacts, or it is refused."""
    problems = []
    hint = "ingest the log of a start of this runbook's pinned artifacts"
    if record.pair != runbook.pair.name:
        problems.append(_problem(display, 0, f"the log is of pair {record.pair!r}, not "
                                 f"{runbook.pair.name!r}", hint))
    for stage in record.artifacts:
        spec = getattr(runbook, stage.artifact, None)
        if spec is None:
            problems.append(_problem(display, 0, f"the log stages a {stage.artifact} the "
                                     "runbook does not have", hint))
            continue
        want = (spec.repo, spec.revision) if stage.source == "hub" else (spec.path, None)
        got = (stage.repo, stage.revision) if stage.source == "hub" else (stage.path, None)
        if want != got:
            problems.append(_problem(display, 0, f"the log staged {stage.artifact} "
                                     f"{got[0]}@{got[1]}, the runbook pins {want[0]}@{want[1]}",
                                     hint))
    if problems:
        raise SpecpairError(problems)


def with_engine_log(record: StagingRecord, engine_text: str) -> StagingRecord:
    """Split engine_start by what the engine logged about its own start."""
    from specpair.engines.log_timings import KV_CAPACITY_KEY, kv_capacity, timings

    engine_text = engine_text.split(BASELINE_MARK, 1)[0]  # the pair's start only
    found = timings(record.engine, engine_text)
    capacity = kv_capacity(record.engine, engine_text)
    if capacity is not None:  # a count, not a sub-phase: read by the budget, by its key
        found[KV_CAPACITY_KEY] = float(capacity)
    if not found:
        return record
    phases = [p.model_copy(update={"detail": found}) if p.phase == "engine_start" else p
              for p in record.phases]
    return record.model_copy(update={"phases": phases})
