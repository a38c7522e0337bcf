"""Acceptance and staging outputs: `breakeven.{md,json}`, `staging.{md,json}` and
`stage-and-launch.sh` (generators/stage_script.py), the script that pre-stages both pinned
artifacts, verifies them, launches, waits for /health and sends the warmup request, failing
loudly at any step and logging every phase."""

from __future__ import annotations

from collections.abc import Callable

from specpair.analyse.analysis import Analysis
from specpair.analyse.latency import LatencyModel
from specpair.analyse.schedule import ScheduleReport
from specpair.analyse.staging import StagingPlan
from specpair.analyse.staging_calibration import Comparison, StagingCalibration, calibrate, compare
from specpair.analyse.step_inputs import NOT_MODELLED_HINT
from specpair.engines.schedule_model import ResolvedSchedule, ScheduledRange
from specpair.engines.verified_layouts import UNVERIFIED_MARK, UNVERIFIED_MEANING, declared_notes
from specpair.generate.render import cell, dump_json, num, table
from specpair.generate.stage_script import stage_script
from specpair.load.staging_log import rate
from specpair.resolve.pair import ResolvedPair


def generate(a: Analysis) -> dict[str, bytes]:
    pair, staging = a.pair, a.staging
    data = staging.model_dump(mode="json")
    if a.not_modelled is None:
        breakeven = a.latency.model_dump(mode="json")
        breakeven["schedule"] = a.schedule.model_dump(mode="json")
        breakeven_md = breakeven_markdown(pair, a.latency) + schedule_markdown(a.schedule)
    else:  # the step model refuses the deployment: its refusal where its numbers would be
        breakeven = {"not_modelled": a.not_modelled}
        if pair.schedule is not None:  # pinned: the launch runs it, unmodelled or not
            breakeven["schedule"] = pair.schedule.model_dump(mode="json")
        breakeven_md = not_modelled_markdown(pair, a.not_modelled)
    if declared_notes(pair):  # only pairs that declare an unverified layout carry the key
        breakeven["unverified"] = declared_notes(pair)
    measured = measured_of(pair, staging)
    calibration = calibrate(pair)
    if measured is not None:  # only pairs with recorded starts carry these keys
        data["measured"] = measured.model_dump(mode="json")
    if calibration is not None:
        data["calibration"] = calibration.model_dump(mode="json")
    return {
        "breakeven.json": dump_json(breakeven),
        "breakeven.md": breakeven_md.encode(),
        "staging.json": dump_json(data),
        "staging.md": (staging_markdown(pair, staging) + (measured_markdown(measured) if
                       measured else "") + (calibration_markdown(calibration) if calibration
                                            else "")).encode(),
        "stage-and-launch.sh": stage_script(pair, staging).encode(),
    }


def not_modelled_markdown(pair: ResolvedPair, not_modelled: str) -> str:
    """breakeven.md of a deployment the latency model refuses: the refusal by name."""
    return (f"# Acceptance and break-even: {cell(pair.runbook.pair.title)}\n\n"
            + "".join(unverified_lines(pair))
            + f"Break-even τ*, TPOT, tokens/s and speedup "
            f"are {cell(not_modelled)}: {cell(NOT_MODELLED_HINT)}.\n"
            + ("" if pair.schedule is None else pinned_schedule_markdown(pair.schedule)))


def pinned_schedule_markdown(s: ResolvedSchedule) -> str:
    """The schedule a refused deployment's launch still runs, without speedups."""
    return ("\n## Speculation schedule\n\n"
            f"{cell(s.source)}; the launch runs it, its speedups are not modelled.\n\n"
            + table(["batch sizes", "K"], [[f"{x.start}–{x.end}", str(x.k)] for x in s.ranges]))


def unverified_lines(pair: ResolvedPair, escape: Callable[[object], str] = cell) -> list[str]:
    """A page's paragraphs for the pair's declared unverified layouts (none otherwise)."""
    return [f"**{escape(UNVERIFIED_MARK)}**: {escape(note)}. {escape(UNVERIFIED_MEANING)}\n\n"
            for note in declared_notes(pair)]


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _rng(x: float | None, r: tuple[float, float] | None) -> str:
    return "–" if x is None or r is None else f"{x:.2f} [{r[0]:.2f}–{r[1]:.2f}]"


VERDICT_MARK = {"pass": "✅ ", "fail": "❌ ", "unreachable": "❌ ", "uncertain": "⚠️ "}


def breakeven_markdown(pair: ResolvedPair, m: LatencyModel) -> str:
    rb = pair.runbook
    here = m.at_concurrency
    stops = (str(m.stops_paying_at_slo) if m.stops_paying_at_slo is not None
             else f"not within what this deployment can run (up to {m.capacity})")
    at = f"concurrency {m.concurrency}" + (
        f" (runbook: {m.requested_concurrency}; the deployment holds {m.capacity})"
        if m.requested_concurrency > m.capacity else "")
    out = [f"# Acceptance and break-even: {cell(rb.pair.title)}\n\n",
           *unverified_lines(pair),
           f"Method **{m.method}**: {m.draft_passes} draft forward(s) of "
           f"{m.tokens_per_draft_pass} token(s) per sequence, verify width {m.verify_width}, "
           f"at most {m.max_tokens_per_step} tokens per step. Expected context "
           f"{m.expected_context:,} tokens per sequence ({cell(m.expected_context_source)}); "
           f"the deployment holds {m.capacity} "
           f"concurrent sequences at that context ({cell(m.capacity_reason)}).\n\n",
           table(["", "value"], [
               ["break-even τ* at " + at, _rng(here.break_even, here.break_even_range)],
               ["acceptance SLO (min τ, " + rb.acceptance.slo.scope.replace("_", " ")
                + f", p{rb.acceptance.slo.percentile})", _f(m.slo)],
               ["reference acceptance", _f(m.reference) + (
                   f" ({cell(rb.acceptance.reference.source)})" if rb.acceptance.reference
                   else "")],
               ["expected speedup at the SLO", _rng(here.speedup_at_slo,
                                                    here.speedup_at_slo_range) + "×"],
               ["expected speedup at the reference",
                _rng(here.speedup_at_reference, here.speedup_at_reference_range) + "×"],
               ["TPOT at the SLO (ms)", _rng(here.tpot_ms_at_slo, here.tpot_ms_at_slo_range)],
               [f"speculation stops paying (at the SLO) above concurrency {m.concurrency} at",
                stops],
               ["concurrencies without gain at the SLO",
                ", ".join(map(str, m.no_gain_at_slo)) or "none"],
               ["verdict", VERDICT_MARK[m.slo_status] + cell(m.slo_verdict)],
           ]),
           f"\n[lo–hi]: the step model's cross-validated error band (leave-one-source-out, "
           f"predicted / published, 10th-90th percentile). Speedup and τ*: "
           f"{cell(m.uncertainty.speedup_basis)}; TPOT: "
           f"{cell(m.uncertainty.throughput_basis)}.\n"]
    if m.hints:
        out.append("\nWhat to change:\n\n" + "".join(f"- {cell(h)}\n" for h in m.hints))
    out += ["\n## Break-even and speedup by concurrency\n\n",
            f"Up to the {m.capacity} sequences the deployment holds. T decode includes "
            "the per-output-token cost once; a speculative step pays T draft + T verify + "
            "τ × that cost.\n\n",
            table(["concurrency", "τ* [interval]", "T decode (ms)", "T draft (ms)",
                   "T verify (ms)", "speedup at SLO", "speedup at reference"],
                  [[str(p.concurrency), _rng(p.break_even, p.break_even_range),
                    f"{p.t_decode_s * 1e3:.2f}", f"{p.t_draft_s * 1e3:.2f}",
                    f"{p.t_verify_s * 1e3:.2f}", _rng(p.speedup_at_slo, p.speedup_at_slo_range),
                    _rng(p.speedup_at_reference, p.speedup_at_reference_range)]
                   for p in m.curve]),
            "\n## Model\n\nS(τ, B) = τ · T_decode / (T_draft + T_verify); τ* = (T_draft + "
            "T_verify) / T_decode; each forward costs a fixed part plus (T_mem³ + T_flops³)^(1/3), "
            "T_mem = bytes / (η_bw · bandwidth), T_flops = FLOPs / (η_f · peak), per rank. "
            "Parameters: "
            f"{cell(m.parameters.values.describe())} ({cell(m.parameters.source)}). "
            "How well this model predicts published measurements: the site page \"How good "
            "is the latency model\". Assumptions:\n\n"]
    out += [f"- {cell(a)}\n" for a in m.assumptions]
    return "".join(out)


def schedule_markdown(r: ScheduleReport) -> str:
    """The schedule section of breakeven.md: the ranges and the speedup of every static K
    and of the schedule by concurrency, or why the release runs none."""
    out = ["\n## Speculation schedule\n\n"]
    if r.schedule is None:
        out.append(f"Not available: {cell(r.refusal)}. The draft length stays static.\n")
        return "".join(out)
    if r.refusal is not None:
        out.append(f"❌ The runbook asks for a schedule the engine cannot run: "
                   f"{cell(r.refusal)}.\n\n")
    elif r.requested == "static":
        out.append("The runbook keeps a static K; `speculation.schedule: derived` would run "
                   "the schedule below.\n\n")
    out.append(f"{cell(r.schedule.source)}.\n\n")
    if r.schedule.k0_cost:
        out.append(f"{cell(r.schedule.k0_cost)}.\n\n")
    out += [table(["batch sizes", "K", "candidates (SGLang tiers)", "note"],
                  [[f"{x.start}–{x.end}", str(x.k), ", ".join(map(str, x.candidates)),
                    range_note(x)] for x in r.schedule.ranges]),
            f"\nExpected speedup over the target alone by concurrency, at the expected "
            f"acceptance by depth ({cell(r.acceptance_source)}):\n\n",
            table(["concurrency", *(f"K = {k}" for k in r.static), "schedule"],
                  [[str(c), *(f"{v[i]:.2f}" for v in r.static.values()),
                    f"{r.scheduled[i]:.2f}" if r.scheduled else "–"]
                   for i, c in enumerate(r.concurrencies)])]
    return "".join(out)


def range_note(x: ScheduledRange) -> str:
    """The note column of a schedule's range: what to measure, and where the target alone
    (no speculator loaded) is expected to be faster than the range's K."""
    notes = ["⚠️ speedup interval contains 1: measure"] if x.uncertain else []
    if x.target_alone_faster_from is not None:
        where = "here" if x.target_alone_faster_from == x.start else \
            f"from batch {x.target_alone_faster_from}"
        notes.append(f"the target alone (no speculator) is faster {where}" if x.k else
                     f"K = 0 still pays for the speculator: the target alone is faster {where}")
    return "; ".join(notes)


def staging_markdown(pair: ResolvedPair, s: StagingPlan) -> str:
    rows = [[cell(step.name), f"{step.seconds:,.1f}", cell(step.detail)] for step in s.steps]
    rows.append(["**cold start**", f"**{s.cold_start_s:,.1f}**",
                 ("❌ " if not s.fits else "⚠️ " if s.unmodelled else "✅ ")
                 + cell(s.verdict)])
    out = [f"# Staging plan: {cell(pair.runbook.pair.title)}\n\n",
           f"Mode **{s.mode}**, order {' → '.join(s.order)}. Download sizes: "
           + ", ".join(f"{role} {num(b)} B" for role, b in s.artifacts.items()) + ".\n\n",
           table(["step", "seconds", "detail"], rows)]
    if s.alternatives:
        out.append("\nOther modes, same assumptions: " + ", ".join(
            f"{mode} {sec:,.1f} s" for mode, sec in s.alternatives.items()) + ".\n")
    out.append(f"\nWarmup check: `{cell(s.warmup['prompt'])}`, {s.warmup['max_tokens']} tokens, "
               f"fails after {s.warmup['timeout_s']} s. `stage-and-launch.sh` runs these "
               "steps, stops at the first failure and logs every phase; `specpair staging "
               "ingest` records the log and compares it with this plan.\n")
    return "".join(out)


def measured_of(pair: ResolvedPair, staging: StagingPlan) -> Comparison | None:
    """The latest recorded start against this plan, or None."""
    return compare(pair, staging, pair.staging_records[-1]) if pair.staging_records else None


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:,.1f}"


def measured_markdown(c: Comparison, level: str = "##",
                      escape: Callable[[object], str] = cell) -> str:
    """Measured against modelled cold start, per phase (staging.md, the card, the site);
    `escape` for the record's text (the site passes its stricter Markdown escaping)."""
    cell = escape
    rows = [[cell(r.phase.strip()) if not r.phase.startswith(" ") else "↳ " + cell(
                r.phase.strip()), _s(r.modelled_s), _s(r.measured_s),
             "–" if r.ratio is None else f"{r.ratio:g}×", cell(r.status),
             cell(r.note)] for r in c.rows]
    rows.append(["**total**", f"**{_s(c.modelled_total_s)}**", f"**{_s(c.measured_total_s)}**",
                 "–" if not c.modelled_total_s else
                 f"{c.measured_total_s / c.modelled_total_s:.2f}×", cell(c.status),
                 ("✅ within" if c.fits else "❌ not within") +
                 f" the budget of {c.budget_s:g} s"])
    outcome = (f"failed in **{cell(c.failed_phase)}**" if c.status == "failed" else
               f"longest phase **{cell(c.dominant_phase)}**")
    return (f"\n{level} Cold start: measured against modelled\n\n"
            f"Recorded start of {cell(c.started_at)} on {cell(c.host or 'an unnamed host')} "
            f"(`{cell(c.record)}`): {outcome}. The gate (SP802) judges this measured cold "
            "start, not the model.\n\n"
            + table(["phase", "modelled s", "measured s", "measured / modelled", "status",
                     "note"], rows))


def _value(key: str, v: float) -> str:
    return rate(v) if key.endswith("bytes_per_s") else f"{v:,.2f} s"


def calibration_markdown(c: StagingCalibration) -> str:
    rows = [[f"`{cell(p.key)}`", _value(p.key, p.assumed), _value(p.key, p.value),
             str(p.points), cell(p.method)] for p in c.parameters]
    out = ["\n## Calibration from recorded starts\n\n",
           f"From {len(c.used)} completed start(s)"
           + (f"; not used: {', '.join(f'`{cell(k)}` ({cell(v)})' for k, v in c.excluded.items())}"
              if c.excluded else "") + ". With these values the model gives a cold start of "
           f"{c.calibrated_cold_start_s:,.1f} s. They are suggestions for the runbook's "
           "`staging:` section (`specpair staging calibrate` prints it); the plan above keeps "
           "the runbook's assumptions.\n\n",
           table(["parameter", "runbook", "calibrated", "points", "how"], rows) if rows
           else "No parameter could be derived from these records.\n"]
    return "".join(out)
