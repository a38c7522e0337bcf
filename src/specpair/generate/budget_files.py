"""`budget.md`, `budget.json`, `budget.csv`: the two-model memory budget of a pair."""

from __future__ import annotations

import csv
import io

from specpair.analyse.analysis import Analysis
from specpair.analyse.latency import LatencyModel
from specpair.analyse.step_inputs import NOT_MODELLED_HINT
from specpair.engines.verified_layouts import (
    DIFFERS_MARK,
    DIFFERS_MEANING,
    UNVERIFIED_MARK,
    UNVERIFIED_MEANING,
    confirmed_text,
)
from specpair.generate.render import cell, dump_json, gib, num, table, value
from specpair.model.budget import Budget, Scenario
from specpair.resolve.pair import ResolvedPair


def generate(a: Analysis) -> dict[str, bytes]:
    b = a.budget
    return {"budget.json": dump_json(b.model_dump(mode="json")),
            "budget.md": (markdown(a.pair, b) + (served(a.latency) if a.not_modelled is None
                                                 else not_served(a.not_modelled))).encode(),
            "budget.csv": csv_rows(b).encode()}


def not_served(not_modelled: str) -> str:
    """The latency section of a deployment the step model refuses: the refusal, no number
    (the memory budget above does not use the step model)."""
    return ("\n## What this budget serves\n\nTPOT, output tokens/s, break-even τ* and the "
            f"expected speedup are {cell(not_modelled)}: {cell(NOT_MODELLED_HINT)}.\n")


def served(m: LatencyModel, at_slo: bool = True) -> str:
    """What the budgeted deployment serves at its headline concurrency, by the step model,
    each figure with its cross-validated interval (breakeven.md has the whole curve).
    Without an SLO (`at_slo` false: a one-command budget given no τ) only what holds for
    any τ: the concurrency and the break-even τ*."""
    here = m.at_concurrency
    tps = here.concurrency * 1e3 / here.tpot_ms_at_slo
    lo_t, hi_t = here.tpot_ms_at_slo_range
    rows = [["concurrency held", f"{m.concurrency} (capacity {m.capacity})"],
            ["TPOT at the SLO's τ (ms)", f"{here.tpot_ms_at_slo:.2f} [{lo_t:.2f}–{hi_t:.2f}]"],
            ["output tokens/s at the SLO's τ", f"{tps:,.0f} [{here.concurrency * 1e3 / hi_t:,.0f}"
                                               f"–{here.concurrency * 1e3 / lo_t:,.0f}]"],
            ["break-even τ*", f"{here.break_even:.2f} [{here.break_even_range[0]:.2f}–"
                              f"{here.break_even_range[1]:.2f}]"],
            ["expected speedup at the SLO", f"{here.speedup_at_slo:.2f}× "
                                            f"[{here.speedup_at_slo_range[0]:.2f}–"
                                            f"{here.speedup_at_slo_range[1]:.2f}]"]]
    if not at_slo:
        rows = [rows[0], rows[3], ["at your acceptance", "give `--slo TAU` for TPOT, "
                                   "tokens/s and the speedup at τ"]]
    return ("\n## What this budget serves\n\nBy the step model at the headline concurrency, "
            f"at an expected context of {m.expected_context:,} tokens per sequence "
            f"({cell(m.expected_context_source)}); "
            "[lo–hi] is its cross-validated error (speedup and τ*: "
            f"{cell(m.uncertainty.speedup_basis)}; TPOT: "
            f"{cell(m.uncertainty.throughput_basis)}). The curve is in `breakeven.md`.\n\n"
            + table(["", "value"], rows))


def break_even_data(a: Analysis, at_slo: bool) -> dict[str, object]:
    """The break-even of `served` as JSON: τ* at the headline concurrency with its
    interval, and with an SLO what it serves at that τ; the refusal where the step model
    refuses the deployment."""
    if a.not_modelled is not None:
        return {"not_modelled": a.not_modelled}
    m = a.latency
    here = m.at_concurrency.model_dump(mode="json")
    keys = ["concurrency", "break_even", "break_even_range"] + (
        ["speedup_at_slo", "speedup_at_slo_range", "tpot_ms_at_slo", "tpot_ms_at_slo_range"]
        if at_slo else [])
    return {"capacity": m.capacity, **({"slo": m.slo} if at_slo else {}),
            **{k: here[k] for k in keys}}


def _estimated(s: Scenario, figure: int, interval: str | None = None) -> str:
    """A figure of the scenario; where the engine measures its KV size at start-up, marked
    as an estimate (with the capacity's interval), never printed as exact."""
    if s.capacity_estimate is None:
        return num(figure)
    shown = s.capacity_estimate if interval is None else interval
    return f"≈ {num(figure)} (estimate" + (f", {shown} tokens" if shown else "") + ")"


def _summary_rows(b: Budget) -> list[list[str]]:
    base, spec = b.baseline, b.speculative
    scenarios = [base] + ([spec] if spec else [])

    def row(label: str, get) -> list[str]:  # type: ignore[no-untyped-def]
        return [label] + [get(s) for s in scenarios]

    rows = [
        row("target KV bytes per token", lambda s: f"{num(s.cell_target)} B"),
        row("draft KV bytes per token", lambda s: f"{num(s.cell_draft)} B"),
        row("bytes per token, both pools", lambda s: f"{num(s.cell_total)} B"),
        row("token capacity (max_total_tokens)", lambda s: _estimated(s, s.max_total_tokens)),
        row("full-context sequences", lambda s: _estimated(s, s.sequences_at_context, "")),
        row("max running requests", lambda s: num(s.max_running_requests)),
        row("target KV pool", lambda s: gib(s.target_kv_bytes)),
        row("draft KV pool", lambda s: gib(s.draft_kv_bytes)),
    ]
    if any(s.state_pool_bytes for s in scenarios):
        rows.append(row("linear-attention state pool",
                        lambda s: f"{gib(s.state_pool_bytes)} ({num(s.state_slots or 0)} slots)"))
    rows += [
        # a deployment that does not fit has no pool to measure headroom in: its verdict
        # says by how much it falls short, where the engine's rules give a figure
        row("headroom, all running requests at full context",
            lambda s: gib(s.full_context_headroom_bytes) if s.fits else
            "none: does not fit (verdict)"),
        row("verdict", lambda s: cell(s.verdict)),
    ]
    return rows


def _verification_notes(b: Budget) -> list[str]:
    """What was checked of the budget, before any number: unverified layouts, figures the
    release's own code gives otherwise, or its confirmation."""
    out = [f"\n**{UNVERIFIED_MARK}**: {cell(note)}. {UNVERIFIED_MEANING}\n"
           for note in b.unverified]
    out += [f"\n**{DIFFERS_MARK}**: {cell(note)}. {DIFFERS_MEANING}\n"
            for note in b.engine_differs]
    if b.confirmed_by:
        out.append(f"\n**{cell(confirmed_text(b.confirmed_by))}.**\n")
    return out


def markdown(pair: ResolvedPair, b: Budget, what_if: dict[str, str] | None = None,
             origin: str | None = None) -> str:
    """budget.md; with `what_if` (option → value given on the command line) the page is
    headed as a what-if with those values, never as the committed, generated file; with
    `origin` (a budget without a runbook) headed by where its inputs came from."""
    rb = pair.runbook
    dep = rb.deployment
    title = "What-if memory budget" if what_if else "Memory budget"
    out = [f"# {title}: {cell(rb.pair.title)}\n\n"]
    if origin:
        out.append(f"{cell(origin)}\n\n")
    elif what_if:
        out.append("**What-if, not the runbook's budget**: computed by `specpair budget` with "
                   + ", ".join(f"`{cell(k)} {cell(v)}`" for k, v in what_if.items())
                   + f" over {cell(pair.source_file)}; the committed budget.md is unchanged."
                   "\n\n")
    out.append(f"Engine **{b.engine}**, {dep.parallel.tensor}× {b.gpu} (tensor parallel "
               f"{dep.parallel.tensor}), context length {num(dep.context_length)}. Every number "
               f"is per {b.per}; GiB = 2^30 bytes."
               + ("" if what_if or origin else " Generated by specpair from the runbook "
                  "and lock; do not edit.") + "\n")
    out += _verification_notes(b)
    spec = b.speculative
    out.append("\n## Baseline and with the draft\n\n")
    header = ["", cell(b.baseline.name)] + ([cell(spec.name)] if spec else [])
    out.append(table(header, _summary_rows(b)))
    out.append("\nThe verdict counts the full-context sequences the token pool holds at "
               "once. The headroom assumes every running request (max running requests) "
               "reaches the full context at the same time: negative headroom means they "
               "cannot all do so, and the engine queues or preempts the rest; it does not "
               "make the deployment fail.\n")
    if spec and not b.baseline.fits:
        out.append("\nNo capacity to compare: the deployment does not fit (the verdict).\n")
    elif spec:
        out.append(f"\nThe draft costs **{b.capacity_lost_pct}%** of the token capacity and "
                   f"holds **{b.draft_share_of_kv_pct}%** of every token's KV bytes.")
        if spec.cell_draft > spec.cell_target:
            out.append(f" Per token the draft's KV ({num(spec.cell_draft)} B) costs more than "
                       f"the target's ({num(spec.cell_target)} B): "
                       f"{spec.cell_draft / spec.cell_target:.2f}×.")
        out.append("\n")
    if b.draft_pool_note:
        out.append(f"\n!!! warning \"Draft pool\"\n    {cell(b.draft_pool_note)}\n")
    if b.fallback:
        fb = b.fallback
        out.append(f"\nIf the engine cannot resolve the draft it budgets {num(fb.cell_draft)} "
                   f"B/token for it and reports {num(fb.max_total_tokens)} tokens "
                   f"({cell(fb.verdict)}).\n")
    s = b.storage
    out.append("\n## Storage\n\n")
    out.append(table(["artifact", "download"], [
        ["target", f"{num(s.target_download_bytes)} B ({gib(s.target_download_bytes)})"],
        ["draft", f"{num(s.draft_download_bytes)} B ({gib(s.draft_download_bytes)})"],
        ["both", f"{num(s.total_download_bytes)} B ({gib(s.total_download_bytes)})"],
        ["disk needed", f"{num(s.disk_needed_bytes)} B ({gib(s.disk_needed_bytes)})"]]))
    out.append(f"\n{cell(s.rule)}\n")
    out.append("\n## Weights per rank\n\n")
    out.append(table(["line", "value", "rule"], [
        [cell(w.label), value(w.value, w.unit), cell(w.rule)] for w in b.weights]))
    out.append("\n## Assumptions\n\nWhat the engine measures at start-up; override them in "
               "`deployment.assumptions` once the engine's log gives the real values.\n\n")
    out.append(table(["assumption", "value", "source"], [
        [cell(a.label), value(a.value, a.unit), cell(a.source)] for a in b.assumptions]))
    for scenario in [b.baseline, spec, b.fallback]:
        if scenario is not None:
            out.append(_trace(scenario))
    provenance = [f"target: {pair.target.provenance}", f"draft: {pair.draft.provenance}"
                  if pair.draft else "no draft"]
    unconfirmed = sorted({f"target.{u}" for u in pair.target.unconfirmed}
                         | {f"draft.{u}" for u in (pair.draft.unconfirmed if pair.draft else [])})
    out.append(f"\n## Provenance\n\nGeometry and bytes from the lock ({', '.join(provenance)}).")
    if unconfirmed:
        out.append(" Unconfirmed declared facts: " + ", ".join(f"`{u}`" for u in unconfirmed)
                   + ".")
    out.append("\n")
    return "".join(out)


def _trace(s: Scenario) -> str:
    return (f"\n### How the engine gets there: {cell(s.name)}\n\n"
            + table(["line", "value", "rule"], [
                [cell(line.label), value(line.value, line.unit), cell(line.rule)]
                for line in s.lines]))


ESTIMATED = ("max_total_tokens", "sequences_at_context", "target_kv_bytes", "draft_kv_bytes",
             "full_context_headroom_bytes")
"""The summary figures that follow from a measured KV size."""


def csv_rows(b: Budget) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["scenario", "key", "label", "value", "unit", "rule"])
    for note in b.unverified:  # first, so that no reader takes a number before it
        writer.writerow(["unverified", "layout", UNVERIFIED_MARK, note, "",
                         "deployment.assumptions.unverified_layouts"])
    for note in b.engine_differs:
        writer.writerow(["engine", "differs", DIFFERS_MARK, note, "", "lock.engine_verdict"])
    if b.confirmed_by:
        writer.writerow(["engine", "confirmed", confirmed_text(b.confirmed_by), b.confirmed_by,
                         "", "lock.engine_verdict"])
    for line in b.weights:
        writer.writerow(["weights", line.key, line.label, line.value, line.unit, line.rule])
    for scenario in (b.baseline, b.speculative, b.fallback):
        if scenario is None:
            continue
        for key in ("cell_target", "cell_draft", "max_total_tokens", "sequences_at_context",
                    "max_running_requests", "target_kv_bytes", "draft_kv_bytes",
                    "state_pool_bytes", "full_context_headroom_bytes"):
            unit = "B" if "bytes" in key or key.startswith("cell") else ""
            estimate = scenario.capacity_estimate
            rule = "summary" if estimate is None or key not in ESTIMATED else \
                f"summary; ESTIMATE (the engine measures its KV size at start-up): {estimate}"
            writer.writerow([scenario.name, key, key.replace("_", " "),
                             getattr(scenario, key), unit, rule])
        writer.writerow([scenario.name, "fits", "fits", scenario.fits, "", scenario.verdict])
    return buffer.getvalue()
