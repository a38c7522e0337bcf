"""`specpair canary RUNBOOK --url URL [--record RECORD] [--json]`: the canary before
traffic, run by hand (or by a rollout pipeline) against a new server.

The code that sends and judges is specpair.bench.canary_probe, the one file the build also
writes as generated/canary.py for deployments without specpair; its config is the one the
build writes as generated/canary.json (specpair.generate.canary_files), computed here from
the same analysis. With `--record`, the request set is the captured traffic the bench
record replayed (its replay workloads, checked by sha256 against the runbook's files), the
first requests of each class (as many as for a synthetic workload, `per_class`), read into
memory only: no prompt or answer text reaches the report.

Exit status: 0 the canary passed, 4 it failed (each reason names class and depth), 1 an
input error located (runbook, record, replay line, or a server that does not answer as an
OpenAI-compatible engine), 2 usage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specpair.bench import canary_probe
from specpair.bench.record import Measurement
from specpair.bench.replay import ReplayRequest
from specpair.model.common import inert
from specpair.model.errors import SpecpairError
from specpair.model.runbook import Runbook
from specpair.resolve.pair import ResolvedPair

EXIT_FAILED = canary_probe.EXIT_FAIL


def config(pair: ResolvedPair, folder: Path, record: Path | None) -> dict[str, Any]:
    """canary.json as the build writes it; with a record, its captured classes instead of
    the synthetic workloads."""
    from specpair.analyse.analysis import Analysis
    from specpair.generate.canary_files import config as generated

    out = generated(Analysis(pair))
    if record is not None:
        out["classes"] = replay_classes(pair.runbook, folder, record, out["concurrency"])
    return out


def replay_classes(rb: Runbook, folder: Path, record_path: Path,
                   concurrency: int) -> list[dict[str, Any]]:
    from specpair.bench import replay
    from specpair.generate.canary_files import per_class
    from specpair.load.runbooks import load_record

    shown = str(record_path)
    record = load_record(record_path, Measurement)
    replayed = {c.workload: c.replay.sha256 for c in record.cells if c.replay is not None}
    if not replayed:
        raise SpecpairError.single(shown, "the record has no replay workload",
                                   "give a record `specpair bench` wrote with a `kind: replay` "
                                   "workload, or leave --record out (the synthetic workloads)")
    by_label: dict[str, list[ReplayRequest]] = {}
    for name, sha in sorted(replayed.items()):
        workload = next((w for w in rb.workloads if w.name == name and w.kind == "replay"),
                        None)
        if workload is None or workload.file is None or workload.sha256 is None:
            raise SpecpairError.single(shown, f"the record replayed workload {inert(name)!r}, "
                                       "which the runbook has no replay workload of",
                                       "give a record of this pair")
        if workload.sha256 != sha:
            raise SpecpairError.single(shown, f"workload {inert(name)}: the record replayed "
                                       f"sha256 {sha}, the runbook now {workload.sha256}",
                                       "give a record of the same request set")
        for request in replay.load(folder, workload.file, workload.sha256,
                                   f"{shown}: workload {name}"):
            by_label.setdefault(request.label, []).append(request)
    if len(by_label) > canary_probe.MAX_CLASSES:
        raise SpecpairError.single(shown, f"the record's request sets hold {len(by_label)} "
                                   f"classes; the canary replays at most "
                                   f"{canary_probe.MAX_CLASSES}",
                                   "record a replay with fewer classes for the canary")
    n, cap = per_class(rb, len(by_label), concurrency), rb.canary.max_tokens
    return [{"name": label, "requests": [_request(r, cap) for r in requests[:n]]}
            for label, requests in sorted(by_label.items())]


def _request(request: ReplayRequest, cap: int) -> dict[str, Any]:
    body = {k: v for k, v in request.body.items() if k != "max_completion_tokens"}
    body["max_tokens"] = min(request.max_tokens, cap)
    return {"path": "/v1/chat/completions" if request.chat else "/v1/completions",
            "body": body}


def run(pair: ResolvedPair, folder: Path, url: str, record: Path | None,
        as_json: bool) -> int:
    settings = config(pair, folder, record)
    try:
        report = canary_probe.run(settings, url)
    except canary_probe.CanaryInputError as exc:
        raise SpecpairError.single(exc.where, exc.what, "point --url at the new server "
                                   "(the engine's OpenAI-compatible API), started from the "
                                   "generated launch script") from None
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        print(summary(report), end="")
    return EXIT_FAILED if report["verdict"] == "fail" else 0


def summary(report: dict[str, Any]) -> str:
    """The report for people: the verdict, each reason, τ per class."""
    lines = [f"canary {report['verdict'].upper()}: {report['pair']} at {report['url']} "
             f"(concurrency {report['concurrency']}, depth {report['depth']})"]
    floor = report["threshold"].get("min_tau")
    lines += [f"  {c['class']}: τ {c['tau'] if c['tau'] is not None else '—'}"
              + (f" (needs ≥ {floor:.3f})" if floor is not None else "")
              + f", {c['succeeded']}/{c['requests']} answered, "
              f"{int(c['verify_steps'])} verify steps" for c in report["classes"]]
    if "note" in report["threshold"]:
        lines.append(f"  note: {report['threshold']['note']}")
    if "checked" in report["threshold"]:
        lines.append(f"  τ threshold {report['threshold']['checked']}")
    if not report["lossless"]["checked"]:
        lines.append(f"  lossless: {report['lossless']['reason']}")
    lines += [f"  FAIL {r['check']}: class {r['class']} depth {r['depth']}: {r['message']}"
              for r in report["reasons"]]
    return "\n".join(lines) + "\n"
