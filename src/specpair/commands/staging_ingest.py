"""`specpair staging ingest` and `specpair staging calibrate`: a deployment log becomes a
record under `runbooks/<pair>/measurements/staging/`, and the records calibrate the
staging model. The pair's generated files are rewritten at once (the same bytes a build
makes), so the measured-vs-modelled table, and a KV capacity the engine logged, show
without another step."""

from __future__ import annotations

import os
from pathlib import Path

from specpair.analyse.analysis import Analysis
from specpair.analyse.staging_calibration import calibrate
from specpair.generate import PAIR_GENERATORS, plan_files
from specpair.generate.render import dump_json
from specpair.load.runbooks import GENERATED_DIR
from specpair.load.staging_log import (
    STAGING_DIR,
    check_belongs,
    file_name,
    load_records,
    parse,
    with_engine_log,
)
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair
from specpair.write.writer import atomic_write

MAX_LOG_BYTES = 256 << 20
"""A log with the engine's output mixed in can be long; anything past this is not a log."""


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_LOG_BYTES:
            raise SpecpairError.single(path, f"the log is over {MAX_LOG_BYTES >> 20} MiB",
                                       "give the deployment log only")
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SpecpairError.single(path, f"cannot read the log: {exc.strerror}",
                                   "check the path") from None


def ingest(pair: ResolvedPair, runbook: Path, log: Path, engine_log: Path | None) -> str:
    record = parse(_read(log), str(log))
    check_belongs(record, pair.runbook, str(log))
    if engine_log is not None:
        record = with_engine_log(record, _read(engine_log))
    folder = Path(os.path.abspath(runbook)).parent  # links are refused, never followed
    path = folder / STAGING_DIR / file_name(record)
    atomic_write(path, dump_json(record.model_dump(mode="json")))
    pair = pair.model_copy(update={"staging_records": load_records(folder)})
    analysis = Analysis(pair)
    # every file of the pair a build makes from it: the card and staging pages show the
    # record, and where the engine measures its KV size at start-up the budget (and what
    # reads its capacity) takes the capacity the engine logged
    for generate in PAIR_GENERATORS:
        for name, content in generate(analysis).items():
            atomic_write(folder / GENERATED_DIR / name, content)
    cold = plan_files.measured_of(pair, analysis.staging)
    assert cold is not None, "the record was just stored"
    return f"staging record written to {path}\n" + plan_files.measured_markdown(cold)


def calibrate_text(pair: ResolvedPair) -> str:
    cal = calibrate(pair)
    if cal is None:
        raise SpecpairError.single(
            pair.source_file, f"no recorded starts under {STAGING_DIR}",
            "run generated/stage-and-launch.sh and `specpair staging ingest` its log")
    lines = [plan_files.calibration_markdown(cal).lstrip("\n"), "\nFor the runbook:\n\n",
             "```yaml\nstaging:\n"]
    for p in cal.parameters:
        lines.append(f"  {p.key}: {p.value:g}  # {p.points} point(s): "
                     f"{', '.join(p.records)}\n")
    lines.append("```\n")
    return "".join(lines)
