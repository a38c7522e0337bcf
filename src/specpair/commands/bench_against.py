"""`specpair bench --against RECORD`: the acceptance regression gate.

The candidate deployment (a new engine release, draft revision, target revision or
schedule) replays the same request sets (same sha256) at the same concurrency as the
recorded one; per workload and class this compares, within the runbook's tolerances
(`acceptance.regression`):

- τ at each draft depth γ (from the engine's per-request acceptance histograms), or
  the mean per-request τ where the engine gives no histogram;
- the share of requests that ran without speculation;
- the pair's output tokens/s at the same concurrency;

and, whatever the tolerances: at temperature 0 the pair's answers equal the target
alone's token for token (speculation is lossless; the first divergence is named), and
answers requested with a JSON schema still validate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specpair import __version__
from specpair.bench.record import Cell, Measurement
from specpair.bench.traffic import ClassStats, ReplayCell
from specpair.model.errors import SpecpairError
from specpair.model.runbook import Regression
from specpair.resolve.pair import ResolvedPair

RULES = {
    "SPB01": ("acceptance-per-depth", "τ per class and draft depth holds"),
    "SPB02": ("fallback-share", "requests keep speculating"),
    "SPB03": ("throughput", "output tokens/s per class holds at the same concurrency"),
    "SPB04": ("lossless", "greedy answers of the pair equal the target alone's"),
    "SPB05": ("json-schema", "answers requested with a JSON schema still validate"),
    "SPB06": ("coverage", "the candidate replays every recorded class"),
}


@dataclass(frozen=True)
class Finding:
    rule: str
    workload: str
    concurrency: int
    label: str
    depth: int | None
    message: str

    def render(self) -> str:
        depth = f" depth {self.depth}" if self.depth is not None else ""
        return (f"{self.rule} {RULES[self.rule][0]}: workload {self.workload} "
                f"c={self.concurrency} class {self.label}{depth}: {self.message}")


def _replays(m: Measurement, where: str) -> dict[tuple[str, int], tuple[Cell, ReplayCell]]:
    out = {(c.workload, c.concurrency): (c, c.replay) for c in m.cells if c.replay is not None}
    if not out:
        raise SpecpairError.single(where, "the record has no replay workload to compare",
                                   "record a replay of your traffic with `specpair bench`")
    return out


def compare(tolerance: Regression, recorded: Measurement, candidate: Measurement,
            record_name: str) -> list[Finding]:
    old = _replays(recorded, record_name)
    new = _replays(candidate, "the candidate run")
    found: list[Finding] = []
    for key, (_, was) in sorted(old.items()):
        workload, c = key
        if key not in new:
            found.append(Finding("SPB06", workload, c, "*", None,
                                 "the candidate did not replay this workload at this "
                                 "concurrency (give the same --concurrency)"))
            continue
        now = new[key][1]
        if now.sha256 != was.sha256:
            raise SpecpairError.single(record_name, f"workload {workload}: the record "
                                       f"replayed sha256 {was.sha256}, the runbook now "
                                       f"{now.sha256}", "compare against a record of the "
                                       "same request set")
        for label, before in sorted(was.speculative.classes.items()):
            after = now.speculative.classes.get(label)
            if after is None:
                found.append(Finding("SPB06", workload, c, label, None,
                                     "no answer of this class in the candidate run"))
                continue
            found += _class(tolerance, workload, c, label, before, after)
        found += _correctness(workload, c, was, now)
    return found


def _class(tol: Regression, workload: str, c: int, label: str, before: ClassStats,
           after: ClassStats) -> list[Finding]:
    out = []

    def add(rule: str, message: str, depth: int | None = None) -> None:
        out.append(Finding(rule, workload, c, label, depth, message))

    if before.tau_by_depth:
        if not after.tau_by_depth:
            add("SPB01", "the candidate reports no per-request acceptance histogram")
        for gamma, (t0, t1) in enumerate(zip(before.tau_by_depth, after.tau_by_depth,
                                             strict=False), 1):
            if t1 < t0 * (1 - tol.tau_drop):
                add("SPB01", f"τ({gamma}) {t0:.3f} → {t1:.3f} ({t1 / t0 - 1:+.1%}; "
                             f"tolerance −{tol.tau_drop:.0%})", gamma)
        if after.tau_by_depth and len(after.tau_by_depth) < len(before.tau_by_depth):
            add("SPB01", f"the candidate drafts {len(after.tau_by_depth)} tokens, the record "
                         f"{len(before.tau_by_depth)}: deeper depths are not compared")
    elif before.tau is not None:
        if after.tau is None:
            add("SPB01", "the candidate reports no per-request τ")
        elif after.tau.mean < before.tau.mean * (1 - tol.tau_drop):
            add("SPB01", f"mean τ {before.tau.mean:.3f} → {after.tau.mean:.3f} "
                         f"(tolerance −{tol.tau_drop:.0%}; no per-depth histogram)")
    w0, w1 = before.without_speculation or 0.0, after.without_speculation or 0.0
    if w1 - w0 > tol.fallback_rise:
        add("SPB02", f"requests without speculation {w0:.0%} → {w1:.0%} (tolerance "
                     f"+{tol.fallback_rise:.0%})")
    r0, r1 = before.output_tokens_per_s, after.output_tokens_per_s
    if r0 and r1 < r0 * (1 - tol.throughput_drop):
        add("SPB03", f"output tokens/s {r0:.1f} → {r1:.1f} ({r1 / r0 - 1:+.1%}; tolerance "
                     f"−{tol.throughput_drop:.0%})")
    return out


def _correctness(workload: str, c: int, was: ReplayCell, now: ReplayCell) -> list[Finding]:
    out = [Finding("SPB04", workload, c, d.label, None,
                   f"request {d.index}: the pair's greedy answer differs from the target "
                   f"alone's at {'token' if d.compared == 'token_ids' else 'character'} "
                   f"{d.position}") for d in now.divergences]
    recorded = {o.index: o.schema_valid for o in was.speculative.requests}
    alone = {o.index: o.schema_valid for o in now.baseline.requests}
    for o in now.speculative.requests:
        if o.schema_valid is False and (recorded.get(o.index) or alone.get(o.index)):
            by = "the target alone's answer does" if alone.get(o.index) else \
                "the recorded answer did"
            out.append(Finding("SPB05", workload, c, o.label, None,
                               f"request {o.index}: the pair's answer does not follow its "
                               f"JSON schema; {by}"))
    return out


def report(findings: list[Finding], record_name: str) -> str:
    if not findings:
        return f"no acceptance regression against {record_name}\n"
    return "".join(f.render() + "\n" for f in findings) + (
        f"{len(findings)} regression(s) against {record_name}\n")


def sarif(findings: list[Finding], runbook: str) -> str:
    ids = sorted(RULES)
    rules = [{"id": i, "name": RULES[i][0], "shortDescription": {"text": RULES[i][1]},
              "defaultConfiguration": {"level": "error"}} for i in ids]
    results = [{
        "ruleId": f.rule, "ruleIndex": ids.index(f.rule), "level": "error",
        "message": {"text": f.render()},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": runbook}},
                       "logicalLocations": [{"fullyQualifiedName":
                                             f"workloads.{f.workload}.{f.label}"}]}],
        "partialFingerprints": {"specpair/v1": f"{f.rule}:{f.workload}:{f.concurrency}:"
                                               f"{f.label}:{f.depth}"}} for f in findings]
    log = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "specpair bench --against",
                                         "version": __version__, "rules": rules}},
                     "results": results}]}
    return json.dumps(log, indent=2, sort_keys=True) + "\n"


def gate(pair: ResolvedPair, folder: Path, record_path: Path, baseline: str, spec: str,
         concurrency: list[int] | None, time_limit_s: float, only: set[str] | None,
         sarif_path: Path | None, display: str) -> int:
    """Replay the record's request sets on the candidate, compare, write the candidate's
    record and the SARIF log under measurements/against/; 1 on any regression."""
    import datetime as dt

    from specpair.commands.bench import run
    from specpair.generate.render import dump_json
    from specpair.load.runbooks import MEASUREMENTS_DIR, load_record
    from specpair.write.writer import atomic_write

    recorded = load_record(record_path, Measurement)
    replayed = {c.workload for c in recorded.cells if c.replay is not None}
    chosen = replayed & only if only else replayed
    levels = concurrency or sorted({c.concurrency for c in recorded.cells
                                    if c.workload in chosen})
    candidate = run(pair, baseline, spec, levels, time_limit_s, folder=folder, only=chosen)
    findings = compare(pair.runbook.acceptance.regression, recorded, candidate,
                       record_path.name)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = folder / MEASUREMENTS_DIR / "against"
    atomic_write(out / f"{stamp}.json", dump_json(candidate.model_dump(mode="json")))
    target = sarif_path or out / f"{stamp}.sarif"
    atomic_write(target, sarif(findings, display).encode())
    print(report(findings, record_path.name), end="")
    print(f"candidate record {out / f'{stamp}.json'}; SARIF {target}")
    return 1 if findings else 0
