"""`specpair check`: run the pre-deployment gate over runbooks and report the findings
as text, JSON, SARIF 2.1.0 (code hosts show SARIF results on pull requests) or Markdown
(the CI job summary, which shows them where code scanning is off)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specpair import __version__
from specpair.analyse.checks.gate import RULES, Context, failing, run
from specpair.commands.impact import code_span, inline, prose
from specpair.load.runbooks import (
    LOCK_NAME,
    LoadedRunbook,
    discover,
    load_location,
    load_lock,
    load_runbook,
)
from specpair.load.staging_log import load_records
from specpair.model.catalogue import unwaivable
from specpair.model.errors import Location, Problem, SpecpairError
from specpair.model.findings import Finding
from specpair.resolve.pair import resolve

LEVEL = {"error": "error", "warning": "warning", "note": "note"}


@dataclass
class Report:
    source_file: str
    pair: str
    findings: list[Finding]


def _display(root: Path, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def hub_drift(loaded_pair: Any) -> list[str]:
    from specpair.lock.hub_remote import HubCheckpoint

    drift = []
    for role in ("target", "draft"):
        art = getattr(loaded_pair, role)
        spec = getattr(loaded_pair.runbook, role)
        if art is None or spec is None or getattr(spec, "repo", None) is None:
            continue
        if art.bundled or art.source.commit is None or art.source.revision == art.source.commit:
            continue
        current = HubCheckpoint(spec.repo, spec.revision or "main").commit
        if current != art.source.commit:
            drift.append(f"{role}: {spec.repo}@{spec.revision} moved from "
                         f"{art.source.commit[:12]} to {current[:12]}")
    return drift


def check(root: Path, paths: list[Path], *, hub: bool = False) -> list[Report]:
    reports: list[Report] = []
    problems: list[Problem] = []
    for path in discover(paths):
        display = _display(root, path)
        try:
            loaded = load_runbook(path, display)
        except SpecpairError as exc:  # invalid runbooks are `validate`'s business: stop
            problems.extend(exc.problems)
            continue
        try:
            lock, _ = load_lock(loaded.folder, _display(root, loaded.folder / LOCK_NAME))
            pair = resolve(loaded, lock, _display(root, loaded.folder / LOCK_NAME), display,
                           staging_records=load_records(loaded.folder))  # for SP802
        except SpecpairError as exc:
            # keep each problem's own place: a broken lock.json is about lock.json
            reports.append(Report(display, loaded.name, [
                Finding("SP102", "error", p.message, p.location.field or "target", p.hint,
                        where=p.location) for p in exc.problems]))
            continue
        ctx = Context(pair)
        if hub:
            try:
                ctx.drift = hub_drift(pair)
            except SpecpairError as exc:
                ctx.drift = [f"drift not checked: {p.message}" for p in exc.problems]
        reports.append(Report(display, pair.name, run(ctx)))
    if problems:
        raise SpecpairError(problems)
    return reports


def _where(report: Report, f: Finding) -> Location:
    return f.where if f.where is not None else load_location(report.source_file, f.field)


def engine_refusals(loaded: LoadedRunbook, display: str) -> list[Problem]:
    """What `validate` adds when the pair has a lock: the findings of the rules that mean
    the engine will not start (TP that does not divide the heads, a context beyond the
    target's positions, a budget that does not fit), as located problems."""
    if not (loaded.folder / LOCK_NAME).exists():
        return []
    lock_display = str(Path(display).parent / LOCK_NAME)
    lock, _ = load_lock(loaded.folder, lock_display)
    pair = resolve(loaded, lock, lock_display, display)
    blocking = unwaivable()
    return [Problem(load_location(display, f.field), f"{f.rule}: {f.message}", f.hint)
            for f in run(Context(pair)) if f.rule in blocking and f.severity == "error"]


def text(reports: list[Report], strict: bool = False) -> str:
    lines = []
    for report in reports:
        for f in report.findings:
            loc = _where(report, f)
            where = f"{loc.file}:{loc.line}:{loc.column}" if loc.line else loc.file
            tag = f"waived: {f.waived}" if f.waived else f.severity
            lines.append(f"{where}: {f.rule} [{tag}] {f.message}")
            if f.hint and not f.waived:
                lines.append(f"    fix: {f.hint}")
    failed = sum(len(failing(r.findings, strict)) for r in reports)
    lines.append(f"{len(reports)} pair(s) checked: {failed} failing finding(s), "
                 f"{sum(len(r.findings) for r in reports)} in all")
    return "\n".join(lines) + "\n"


def markdown(reports: list[Report], strict: bool = False) -> str:
    """The findings for GitHub's job summary, which renders Markdown and HTML: runbook text
    (messages, hints, waiver reasons, paths) only as inert text or code spans, as in the
    change-impact checklist."""
    failed = sum(len(failing(r.findings, strict)) for r in reports)
    total = sum(len(r.findings) for r in reports)
    out = [f"## specpair check: {len(reports)} pair(s) checked, {failed} failing "
           f"finding(s), {total} in all\n\n"]
    for report in reports:
        for f in report.findings:
            loc = _where(report, f)
            where = f"{loc.file}:{loc.line}:{loc.column}" if loc.line else loc.file
            mark = "❌" if failing([f], strict) else "⚠️" if f.severity == "warning" and \
                not f.waived else "➖"
            tag = f"waived: {prose(f.waived)}" if f.waived else inline(f.severity)
            line = f"- {mark} {code_span(f.rule)} ({tag}) {code_span(where)}: {prose(f.message)}"
            if f.hint and not f.waived:
                line += f" Fix: {prose(f.hint)}"
            out.append(line + "\n")
    return "".join(out)


def as_json(reports: list[Report]) -> str:
    data = [{"runbook": r.source_file, "pair": r.pair,
             "findings": [asdict(f) | {"line": _where(r, f).line} for f in r.findings]}
            for r in reports]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def sarif(reports: list[Report]) -> str:
    rules = [{"id": r.id, "name": r.name, "shortDescription": {"text": r.title},
              "fullDescription": {"text": r.why}, "help": {"text": r.why},
              "defaultConfiguration": {"level": LEVEL[r.severity]}} for r in RULES]
    index = {r.id: i for i, r in enumerate(RULES)}
    results = []
    for report in reports:
        for f in report.findings:
            loc = _where(report, f)
            physical: dict[str, Any] = {"artifactLocation": {"uri": loc.file}}
            if loc.line:
                physical["region"] = {"startLine": loc.line, "startColumn": loc.column or 1}
            result: dict[str, Any] = {
                "ruleId": f.rule, "ruleIndex": index[f.rule], "level": LEVEL[f.severity],
                "message": {"text": f.message + (f" Fix: {f.hint}" if f.hint else "")},
                "locations": [{"physicalLocation": physical,
                               "logicalLocations": [{"fullyQualifiedName": f.field}]}],
                "partialFingerprints": {"specpair/v1": f"{report.pair}:{f.rule}:{f.field}"}}
            if f.waived:
                result["suppressions"] = [{"kind": "inSource", "justification": f.waived}]
            results.append(result)
    log = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "specpair", "version": __version__,
                                         "informationUri": "https://example.invalid/specpair",
                                         "rules": rules}},
                     "results": results, "columnKind": "unicodeCodePoints"}]}
    return json.dumps(log, indent=2, sort_keys=True) + "\n"
