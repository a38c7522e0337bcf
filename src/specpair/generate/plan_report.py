"""The plan as Markdown (terminal and site) and JSON."""

from __future__ import annotations

import json
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


def _row(i: int | str, r: Row, esc: Escape) -> list[str]:
    verdict = "passes" if r.passes_check else esc("; ".join(r.notes + r.check_failures))
    return [str(i), esc(f"{r.gpus} × {r.gpu}" + (f" ({r.replicas} replicas)"
                                                 if r.replicas > 1 else "")),
            str(r.tensor), esc(r.kv_cache_dtype), _mem(r), esc(r.shape), str(r.concurrency),
            f"{r.tokens_per_s_per_gpu:,.1f} [{r.tokens_per_s_per_gpu_range[0]:,.0f}–"
            f"{r.tokens_per_s_per_gpu_range[1]:,.0f}]", f"{r.tokens_per_s_per_request:,.1f}",
            f"{r.tpot_ms:.1f} [{r.tpot_ms_range[0]:.1f}–{r.tpot_ms_range[1]:.1f}]",
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
    if r.kv_tokens_estimate is None:
        return f"fits: {r.capacity:,} seq"
    return f"fits: ≈ {r.capacity:,} seq (estimate)"


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


def recommendation(p: Plan, esc: Escape = cell, site: bool = False) -> str:
    def code(value: object) -> str:
        return f"<code>{esc(value)}</code>" if site else f"`{value}`"

    best = p.best
    if best is None:
        return ("No candidate meets the targets and passes the gate: relax a target, "
                "allow more GPUs (--max-gpus) or other GPUs (--gpus).\n")
    if best.depth == 0:
        spec = p.best_speculative
        than = (f" The best draft shape ({esc(spec.shape)}, {esc(spec.gpu)} TP{spec.tensor}) "
                f"gives {spec.tokens_per_s_per_gpu:,.1f} tokens/s per GPU."
                if spec is not None else " No draft shape keeps its SLO above break-even "
                "+ 10% within the targets.")
        return (f"**Serve the target alone**: {best.tokens_per_s_per_gpu:,.1f} tokens/s per "
                f"GPU at {best.concurrency} sequences on {best.gpus} × {esc(best.gpu)} TP"
                f"{best.tensor}.{than} A runbook describes a pair, so no runbook edit "
                "applies: launch the baseline script the build generates ("
                + code("generated/launch-*-baseline.sh") + "), or improve the draft's "
                "acceptance.\n")
    cur = p.current
    gain = ""
    if cur is not None and cur.passes_check and cur.tokens_per_s_per_gpu:
        gain = (f" ({best.tokens_per_s_per_gpu / cur.tokens_per_s_per_gpu - 1:+.0%} per GPU "
                f"and {best.tokens_per_s_per_request / cur.tokens_per_s_per_request - 1:+.0%}"
                " per request against the runbook as written)")
    if not best.changes:
        return (f"**The runbook as written is the best candidate**: "
                f"{best.tokens_per_s_per_gpu:,.1f} tokens/s per GPU.\n")
    fields = ", ".join(f"{code(k)} → {code(v)}" for k, v in best.changes.items())
    slo = best.changes.get("acceptance.slo.min_length")
    why_slo = (f" The SLO moves to τ ≥ {slo:g} because the draft's depth changes: the same "
               "acceptance per drafted token, counted over the new depth."
               if slo is not None else "")
    return (f"**Recommended**: {esc(best.shape)} on {best.gpus} × {esc(best.gpu)} TP"
            f"{best.tensor}, {best.tokens_per_s_per_gpu:,.1f} tokens/s per GPU{gain}. "
            f"Changes: {fields}.{why_slo}\n")


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
            out.append("Best first (the first row is the recommendation: among the "
                       "candidates whose throughput interval overlaps the top's, the model "
                       "cannot rank them, so the fewest changes win). ")
        else:
            out.append(f"{heading}# Closest candidates (none passes)\n\n")
            out.append("What each misses is in the last column. ")
        # through esc: on the site the two asterisks of τ* would otherwise make italics
        out.append(esc("τ: expected tokens per step at the draft's depth; "
                       "τ SLO: the SLO at that depth; τ*: break-even at that concurrency; "
                       "margin: SLO over τ*; budget: the engine's memory budget and the "
                       "sequences its KV pool holds at the expected context; [lo–hi]: the "
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
