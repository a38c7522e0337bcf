"""The plan as Markdown (terminal and site) and JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from specpair.analyse.plan.results import Plan, Row
from specpair.engines.verified_layouts import UNVERIFIED_MARK, UNVERIFIED_MEANING
from specpair.generate.render import table

Escape = Callable[[object], str]


def cell(value: object) -> str:
    """Plain text inside a Markdown table cell, for the terminal (the site passes its own
    escaping, which also makes markup inert)."""
    return str(value).replace("|", "\\|").replace("\n", " ")


MODE_TEXT = {
    "concurrency": "at concurrency {c} ({why})",
    "max": "at the most sequences each deployment holds within the targets and the SLO",
    "rate": "serving {rate:g} requests/s with the fewest GPUs",
}


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "–" if x is None else format(x, fmt)


def _mem(r: Row) -> str:
    return "default" if r.memory_fraction is None else f"{r.memory_fraction:g}"


def _around(r: tuple[float, float], places: int) -> str:
    """An interval rounded outward: rounded to the nearest, a bound equal to its point
    (a one-sided band) would print on the wrong side of the point printed beside it."""
    k = 10 ** places
    return (f"[{math.floor(r[0] * k + 1e-9) / k:,.{places}f}–"
            f"{math.ceil(r[1] * k - 1e-9) / k:,.{places}f}]")


def _row(i: int | str, r: Row, esc: Escape) -> list[str]:
    verdict = "passes" if r.passes_check else esc("; ".join(r.notes + r.check_failures))
    return [str(i), esc(f"{r.gpus} × {r.gpu}" + (f" ({r.replicas} replicas)"
                                                 if r.replicas > 1 else "")),
            str(r.tensor), esc(r.kv_cache_dtype), _mem(r), esc(r.shape), str(r.concurrency),
            f"{r.tokens_per_s_per_gpu:,.1f} {_around(r.tokens_per_s_per_gpu_range, 0)}",
            f"{r.tokens_per_s_per_request:,.1f}",
            f"{r.tpot_ms:.1f} {_around(r.tpot_ms_range, 1)}",
            f"{r.ttft_ms:.0f}", _f(r.tau), _f(r.tau_slo),
            _f(r.break_even) + ("" if r.break_even_range is None else
                                f" [{r.break_even_range[0]:.2f}–{r.break_even_range[1]:.2f}]"),
            "–" if r.slo_margin_pct is None else f"{r.slo_margin_pct:+.0f}%",
            _fits(r),
            "–" if r.validation_pct is None else f"{r.validation_pct:.0f}%",
            verdict]


def _fits(r: Row) -> str:
    """The budget column; a capacity the engine measures at start-up is an estimate."""
    if not r.budget_fits:
        return "over"
    full = ("⚠️ " if r.holds_concurrency is False else "") + \
        f"{r.full_context_sequences:,} at full context"
    if r.kv_tokens_estimate is None:
        return f"fits: {r.capacity:,} seq, {full}"
    return f"fits: ≈ {r.capacity:,} seq, {full} (estimate)"


HEADER = ["#", "GPUs", "TP", "KV", "mem", "draft", "conc.", "tok/s/GPU", "tok/s/req",
          "TPOT ms", "TTFT ms", "τ", "τ SLO", "τ*", "margin", "budget", "model err.",
          "gate"]


def mode_text(p: Plan) -> str:
    return MODE_TEXT[p.mode].format(c=p.targets.get("concurrency"), why=p.concurrency_source,
                                    rate=p.targets.get("rate") or 0.0)


def summary(p: Plan, timing: bool = True) -> str:
    c = p.counts
    refusals = ", ".join(f"{rule} ×{n}" for rule, n in p.refusals.items())
    took = (f" in {p.seconds:.2f} s ({p.ms_per_candidate:.1f} ms per candidate)"
            if timing else "")
    return (f"{c.candidates} candidates ({c.deployments} deployments × {c.shapes} draft "
            f"shapes, no draft included){took}: {c.refused_by_engine} refused by an engine "
            f"rule{f' ({refusals})' if refusals else ''}, {c.over_budget} over the memory "
            f"budget, {c.beyond_measured_depth} beyond the measured depth, "
            f"{c.no_operating_point} without an operating point within the targets and the "
            f"SLO, {c.fail_other_rules} failing another gate rule"
            + (f", {c.not_modelled} not modelled by the latency model (wider than a node)"
               if c.not_modelled else "") + f"; {c.ranked} ranked.")


def _rule(reason: str) -> str:
    """The rule id a verdict starts with ("SP101: …", "plan-slo-margin: …")."""
    head, sep, _ = reason.partition(": ")
    return head if sep and " " not in head else reason


def _why_no_draft(p: Plan, esc: Escape) -> str:
    """Why no draft shape passes: the rules that exclude the draft rows, by count, and
    what the fastest of them would give, so the reason is the true one."""
    drafts = [r for r in p.rows if r.depth > 0]
    if not drafts:
        return " No draft shape fits the memory budget or the engines' rules."
    counts: dict[str, int] = {}
    example: dict[str, str] = {}
    for r in drafts:
        for reason in r.notes + r.check_failures:
            example.setdefault(_rule(reason), reason)
        for rule in dict.fromkeys(_rule(x) for x in r.notes + r.check_failures):
            counts[rule] = counts.get(rule, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    why = "; ".join(f"{n} of {len(drafts)} fail {esc(example[rule])}" for rule, n in ranked)
    gate = [r for r in drafts if r.meets_targets]
    out = f" No draft shape passes: {why}."
    if gate and p.best is not None and p.best.tokens_per_s_per_gpu:
        top = gate[0]  # ranked: holding the concurrency at full context first
        out += (f" Those that meet the targets and clear break-even fail only gate rules; "
                f"the first ranked ({esc(top.shape)}, {esc(top.gpu)} TP{top.tensor}) would give "
                f"{top.tokens_per_s_per_gpu:,.1f} tokens/s per GPU "
                f"({top.tokens_per_s_per_gpu / p.best.tokens_per_s_per_gpu - 1:+.0%} against "
                "the target alone) once they pass.")
    return out


def _holds(r: Row, p: Plan) -> str:
    if r.holds_concurrency is not False:
        return ""
    return (f" ⚠️ It holds {r.full_context_sequences} sequences at the full context of "
            f"{p.context_length:,} tokens, not {r.concurrency}: no passing candidate holds "
            "them all.")


def _resolution(p: Plan, esc: Escape) -> str:
    """The best against the recommendation, where they differ."""
    best, c = p.best, p.recommended_against
    if best is None or c is None or p.recommended is best:
        return ""
    lo, hi = c.per_gpu_interval
    rlo, rhi = c.per_request_interval
    return (f" The best candidate ({esc(best.key)}) differs by {c.per_gpu - 1:+.1%} tokens/s "
            f"per GPU [{lo - 1:+.1%} to {hi - 1:+.1%}] and {c.per_request - 1:+.1%} per "
            f"request [{rlo - 1:+.1%} to {rhi - 1:+.1%}], a difference the model cannot "
            f"resolve ({esc(c.basis)}), so the fewest changes win.")


def recommendation(p: Plan, esc: Escape = cell, site: bool = False) -> str:
    def code(value: object) -> str:
        return f"<code>{esc(value)}</code>" if site else f"`{value}`"

    rec = p.recommended
    if rec is None:
        return ("No candidate meets the targets and passes the gate: relax a target, "
                "allow more GPUs (--max-gpus) or other GPUs (--gpus).\n")
    is_best = rec is p.best or (p.best is not None and rec.key == p.best.key)
    if rec.depth == 0:
        spec = p.best_speculative
        than = (f" The best draft shape ({esc(spec.shape)}, {esc(spec.gpu)} TP{spec.tensor}) "
                f"gives {spec.tokens_per_s_per_gpu:,.1f} tokens/s per GPU"
                + (f" but holds {spec.full_context_sequences} sequences at the full context "
                   f"of {p.context_length:,} tokens, not {spec.concurrency}."
                   if spec.holds_concurrency is False else ".")
                if spec is not None else _why_no_draft(p, esc))
        return (f"**Serve the target alone**: {rec.tokens_per_s_per_gpu:,.1f} tokens/s per "
                f"GPU at {rec.concurrency} sequences on {rec.gpus} × {esc(rec.gpu)} TP"
                f"{rec.tensor}.{than}{_resolution(p, esc)}{_holds(rec, p)} A runbook "
                "describes a pair, so no runbook edit applies: launch the baseline script "
                "the build generates (" + code("generated/launch-*-baseline.sh") + "), or "
                "fix what excludes the draft.\n")
    cur = p.current
    gain = ""
    if cur is not None and cur.passes_check and cur.tokens_per_s_per_gpu and rec.changes:
        gain = (f" ({rec.tokens_per_s_per_gpu / cur.tokens_per_s_per_gpu - 1:+.0%} per GPU "
                f"and {rec.tokens_per_s_per_request / cur.tokens_per_s_per_request - 1:+.0%}"
                " per request against the runbook as written)")
    best_words = (" (the best: no passing candidate beats it on both tokens/s per GPU and "
                  "per request)" if is_best else "")
    if not rec.changes:
        head = ("**The runbook as written is the best candidate**" if is_best
                else "**Keep the runbook as written**")
        return (f"{head}: {rec.tokens_per_s_per_gpu:,.1f} tokens/s per GPU, "
                f"{rec.tokens_per_s_per_request:,.1f} per request{best_words}."
                f"{_resolution(p, esc)}{_holds(rec, p)}\n")
    fields = ", ".join(f"{code(k)} → {code(v)}" for k, v in rec.changes.items())
    slo = rec.changes.get("acceptance.slo.min_length")
    why_slo = (f" The SLO moves to τ ≥ {slo:g} because the draft's depth changes: the same "
               "acceptance per drafted token, counted over the new depth."
               if slo is not None else "")
    return (f"**Recommended**{best_words}: {esc(rec.shape)} on {rec.gpus} × {esc(rec.gpu)} TP"
            f"{rec.tensor}, {rec.tokens_per_s_per_gpu:,.1f} tokens/s per GPU{gain}. "
            f"Changes: {fields}.{why_slo}{_resolution(p, esc)}{_holds(rec, p)}\n")


def markdown(p: Plan, top: int = 10, esc: Escape = cell, site: bool = False) -> str:
    """The plan for the terminal, or (site=True) as a section of the pair's page: no
    timings there (the page must be byte-identical run to run), headings one level down."""
    timing = not site
    heading = "##" if site else "#"
    out = ["" if site else f"# Plan: {esc(p.pair)}\n\n",
           f"{esc(p.engine)} · GPUs searched: {esc(', '.join(p.gpus))} · up to {p.max_gpus} "
           f"GPU(s) per replica · {esc(mode_text(p))}"]
    t = p.targets
    limits = [f"TPOT ≤ {t['tpot_ms']:g} ms" for _ in [0] if t.get("tpot_ms")] + \
        [f"TTFT ≤ {t['ttft_ms']:g} ms" for _ in [0] if t.get("ttft_ms")]
    out.append((" · " + ", ".join(limits)) if limits else "")
    out += [f"\n\n**{esc(UNVERIFIED_MARK)}**: {esc(note)}. {esc(UNVERIFIED_MEANING)}"
            for note in p.unverified]
    out.append("\n\n" + summary(p, timing) + "\n\n")
    out.append(recommendation(p, esc, site) + "\n")
    shown = p.rows[:top]
    if shown:
        if p.best is not None:
            out.append(f"{heading}# Ranked candidates\n\n")
            out.append("Best first: the candidates that hold the concurrency at full "
                       "context before those that do not, then by tokens/s per GPU; the first "
                       "row is the best (no passing candidate beats it on both tokens/s per "
                       "GPU and per request). The recommendation is the best, or the "
                       "candidate with the fewest changes whose difference from it the model "
                       "cannot resolve: candidates scored by one model share its error, so "
                       "their ratio is compared, with the model's paired error. ")
        else:
            out.append(f"{heading}# Closest candidates (none passes)\n\n")
            out.append("What each misses is in the last column. ")
        # through esc: on the site the two asterisks of τ* would otherwise make italics
        out.append(esc("τ: expected tokens per step at the draft's depth; "
                       "τ SLO: the SLO at that depth; τ*: break-even at that concurrency; "
                       "margin: SLO over τ*; budget: the engine's memory budget and the "
                       "sequences its KV pool holds at the expected context and at the full "
                       f"context length ({p.context_length:,} tokens); [lo–hi]: the "
                       "interval from the step model's cross-validated error "
                       "(leave-one-source-out, 10th-90th percentile) of that GPU family × "
                       "engine × drafter family; model err.: its median cross-validated error "
                       "(– where borrowed from a wider pool).") + "\n\n")
        out.append(table(HEADER, [_row(i + 1, r, esc) for i, r in enumerate(shown)]))
        if len(p.rows) > top:
            more = "<code>specpair plan --json</code>" if site else "`--json`"
            out.append(f"\n{len(p.rows) - top} more row(s) in {more}.\n")
    if p.current is not None:
        out.append(f"\n{heading}# The runbook as written\n\n")
        out.append(table(HEADER, [_row("now", p.current, esc)]))
    elif p.current_not_modelled is not None:
        out.append(f"\n{heading}# The runbook as written\n\n")
        out.append(f"Its deployment is {esc(p.current_not_modelled)}: the candidates above "
                   "are those the latency model represents, within one node.\n")
    if p.front:
        out.append(f"\n{heading}# Pareto front\n\n")
        out.append("Throughput per GPU against speed per request: no point is beaten on "
                   "both.\n\n")
        out.append(table(["tok/s/req", "tok/s/GPU", "concurrency", "candidate"], [
            [f"{f.tokens_per_s_per_request:,.1f}", f"{f.tokens_per_s_per_gpu:,.1f}",
             str(f.concurrency), esc(f.key)] for f in p.front]))
    model = p.best or p.current
    out.append(f"\n{heading}# Model\n\n")
    if model is not None:
        out.append(f"- step-time parameters: {esc(model.params_source)}\n")
        out.append(f"- validation: {esc(model.validation)}\n")
    out += [f"- {esc(a)}\n" for a in p.assumptions]
    return "".join(out)


def as_json(p: Plan, timing: bool = True) -> str:
    data = p.model_dump(mode="json")
    if not data["unverified"]:  # only plans that declare an unverified layout carry the key
        data.pop("unverified")
    if not timing:
        data.pop("seconds")
        data.pop("ms_per_candidate")
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
