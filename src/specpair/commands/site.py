"""The runbook site: MkDocs Material pages generated from the resolved pairs.

`specpair site` writes `site/docs/pairs/`: an index of every pair and one page per pair
(overview, launch commands in SGLang | vLLM tabs, memory budget with a chart, acceptance
and break-even with charts, staging plan, checks, the latest change checklist, the pair
card, and the provenance of every fact). The pages are not committed: the change
checklist depends on git history (`--changes-base`). Everything from a runbook is escaped
for Markdown and HTML, so no runbook text can inject markup or scripts into the site.
"""

from __future__ import annotations

import gc
import html
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specpair.analyse.analysis import Analysis
from specpair.analyse.checks.gate import failing
from specpair.analyse.latency import LatencyModel
from specpair.engines import registry
from specpair.engines import verified_layouts as layouts
from specpair.engines.schedule_model import ResolvedSchedule
from specpair.generate import (
    autoscaler_files,
    card_files,
    charts,
    dashboard_files,
    launch_files,
    monitoring_files,
)
from specpair.generate.render import gib, num
from specpair.model.common import inert
from specpair.model.errors import SpecpairError
from specpair.model.findings import Finding
from specpair.model.lock import Fallback, VocabMapping
from specpair.resolve.pair import ResolvedPair
from specpair.write.writer import Outputs

PAGES = Path("site/docs/pairs")
MODEL = Path("site/docs/model")  # its own navigation section, not one of the pairs
CHART = "{ .chart }"  # attr_list: charts keep a readable size on phones (specpair.css)
# Python-Markdown's escapable characters (and the tables extension's |): a backslash
# before any other character, such as ~, shows literally
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>])")


def text(value: object) -> str:
    """Runbook text as inert Markdown: HTML-escaped, Markdown syntax backslash-escaped."""
    escaped = html.escape(inert(" ".join(str(value).split())), quote=True)
    return _MD_SPECIAL.sub(r"\\\1", escaped)


def attribute(value: object) -> str:
    """Runbook text for the page's front matter, which the theme prints unescaped into
    <title>, the header, the navigation and <meta content="...">: one line, both quote
    styles and every markup character as entities, then quoted for YAML."""
    return json.dumps(html.escape(inert(" ".join(str(value).split())), quote=True))


def front_matter(title: object, description: object | None) -> str:
    lines = ["---\n", f"title: {attribute(title)}\n"]
    if description:
        lines.append(f"description: {attribute(description)}\n")
    return "".join(lines) + "---\n\n"


def prose(value: str) -> str:
    """specpair's own text that marks names in backticks: escaped, the names as code."""
    def words(part: str) -> str:  # text() trims; keep the spaces around each name
        lead = " " if part[:1].isspace() else ""
        trail = " " if part[-1:].isspace() and part.strip() else ""
        return lead + text(part) + trail

    return "".join(f"<code>{html.escape(part)}</code>" if i % 2 else words(part)
                   for i, part in enumerate(value.split("`")))


def code_block(content: str, lang: str = "sh") -> str:
    fence = "```"
    while fence in content:  # a fence longer than any run of backticks inside
        fence += "`"
    return f"{fence}{lang}\n{content.rstrip()}\n{fence}\n"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("\n", " ") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def pair_page(a: Analysis, changes: str | None) -> tuple[str, dict[str, bytes], dict[
        str, object]]:
    pair = a.pair
    rb = pair.runbook
    # `latency` is None where the step model refuses the deployment by name: the page then
    # says so where its numbers would be, as every generated file does
    budget, latency = a.budget, a.modelled
    refused = a.not_modelled
    failures = failing(a.findings)
    charts_out = {"memory.svg": charts.memory(budget)}
    if latency is not None:
        charts_out |= {"speedup.svg": charts.speedup(latency),
                       "break-even.svg": charts.break_even(latency)}
    lines: list[str] = [front_matter(rb.pair.title, rb.pair.description),
                        f"# {text(rb.pair.title)}\n\n"]
    lines += _overview(a, len(failures), sum(f.waived is not None for f in a.findings))
    lines += _launch_section(a)
    lines += _memory_section(a)
    lines.append("\n## Acceptance and break-even\n\n")
    if latency is None:
        lines.append(f'!!! warning "Break-even"\n    {text(refused)}\n')
        if pair.schedule is not None:  # pinned: the launch runs it, its speedups unmodelled
            lines.append("\nSpeculation schedule (pinned; speedups not modelled): "
                         + ranges_text(pair.schedule) + ".\n")
    else:
        lines.append(_break_even_section(a, latency, charts_out))
    lines.append(_alerts_section(a, charts_out))
    lines.append(_plan_section(a, charts_out))
    lines.append("\n## Staging plan\n\n")
    return _rest(a, lines, charts_out, changes, failures)


def _overview(a: Analysis, failures: int, waived: int) -> list[str]:
    """The page's head: who owns the pair, its gate status (with its waivers: a pass that
    rests on waived findings says so), warnings, the overview table."""
    pair, budget, latency, staging = a.pair, a.budget, a.modelled, a.staging
    rb = pair.runbook
    status = "passes the gate" if not failures else f"FAILS the gate: {failures} finding(s)"
    if waived:
        status += f" with {waived} waived finding{'s' if waived > 1 else ''}"
    lines = [f"Pair <code>{pair.name}</code> · owner {text(rb.pair.owner)} · "
             f"{text(pair.engine)} · {text(rb.speculation.method.value)} · {status}\n\n"]
    if rb.pair.description:
        lines.append(f"{text(rb.pair.description)}\n\n")
    for mark, meaning, notes in ((layouts.UNVERIFIED_MARK, layouts.UNVERIFIED_MEANING,
                                  budget.unverified),  # before any number of the budget
                                 (layouts.DIFFERS_MARK, layouts.DIFFERS_MEANING,
                                  budget.engine_differs)):
        lines += [f'!!! danger "{mark}"\n    {text(n)}. {text(meaning)}\n\n' for n in notes]
    if budget.confirmed_by:
        lines.append('!!! success "Confirmed by the engine"\n    '
                     f"{text(layouts.confirmed_text(budget.confirmed_by))}.\n\n")
    lines.append("## Overview\n\n")
    rows = [["target", _artifact(pair, "target")], ["draft", _artifact(pair, "draft")],
            ["GPU", f"{text(rb.deployment.parallel.tensor)} × {text(pair.gpu)}"],
            ["context length", num(rb.deployment.context_length)],
            ["acceptance SLO", f"τ ≥ {rb.acceptance.slo.min_length:g} "
                               f"({text(rb.acceptance.slo.scope)}, "
                               f"p{rb.acceptance.slo.percentile}, basis "
                               f"{text(rb.acceptance.slo.basis)})"],
            ["break-even τ*", text(a.not_modelled) if latency is None else
             f"{latency.at_concurrency.break_even:.2f} "
             f"[{latency.at_concurrency.break_even_range[0]:.2f}–"
             f"{latency.at_concurrency.break_even_range[1]:.2f}] at "
             f"concurrency {latency.concurrency}"],
            ["draft share of KV", f"{budget.draft_share_of_kv_pct}% of every token's bytes; "
                                  f"{budget.capacity_lost_pct}% of the token capacity"],
            ["cold start", f"{staging.cold_start_s:g} s of {staging.budget_s:g} s"]]
    lines.append(_table(["", ""], rows))
    if pair.vocab_mapping is not None:
        lines.append(vocabulary_section(pair.vocab_mapping))
    return lines


def _launch_section(a: Analysis) -> list[str]:
    """One tab per engine release, the runbook's own first (the one a reader takes)."""
    pair = a.pair
    launch = launch_files.generate(a)
    index = json.loads(launch["args.json"])
    lines = ["\n## Launch commands\n\n"]
    for engine, data in sorted(index["engines"].items(), key=lambda e: e[0] != pair.engine):
        label = engine.split()[0]
        lines.append(f'=== "{registry.by_label(engine).profile.display_name}"\n\n')
        if data["generated"]:
            script = launch[f"launch-{label}.sh"].decode()
            note = "The runbook's engine." if data.get("primary") else \
                "A translation: not budgeted, not gated."
            lines.append(f"    {note}\n\n")
            lines.append(_indent(code_block(script, "sh")))
        else:
            lines.append("    Not generated for this engine:\n\n")
            lines += [f"    - {text(why)}\n" for why in data["why"]]
        lines.append("\n")
    return lines


def _memory_section(a: Analysis) -> list[str]:
    """The budget per GPU rank, both scenarios; a measured capacity as the estimate it is."""
    pair, budget = a.pair, a.budget
    base, spec = budget.baseline, budget.speculative or budget.baseline
    lines = ["\n## Memory budget\n\n",
             f"![Memory per GPU rank]({pair.name}/memory.svg){CHART}\n\n"]
    lines.append(_table(["per GPU rank", text(base.name), text(spec.name)], [
        ["bytes per token (target + draft)", f"{num(base.cell_total)} B",
         f"{num(spec.cell_target)} + {num(spec.cell_draft)} = {num(spec.cell_total)} B"],
        ["token capacity", *(num(s.max_total_tokens) if s.capacity_estimate is None else
                             f"≈ {num(s.max_total_tokens)} (estimate, {s.capacity_estimate})"
                             for s in (base, spec))],
        ["full-context sequences", *(num(s.sequences_at_context) + (
            "" if s.capacity_estimate is None else " (estimate)") for s in (base, spec))],
        ["max running requests", num(base.max_running_requests),
         num(spec.max_running_requests)],
        ["target KV pool", gib(base.target_kv_bytes), gib(spec.target_kv_bytes)],
        ["draft KV pool", gib(base.draft_kv_bytes), gib(spec.draft_kv_bytes)],
        ["verdict", text(base.verdict), text(spec.verdict)]]))
    lines.append(f"\nDownloads: target {gib(budget.storage.target_download_bytes)}, draft "
                 f"{gib(budget.storage.draft_download_bytes)}; disk needed "
                 f"{gib(budget.storage.disk_needed_bytes)}. Every line with its rule: "
                 "`generated/budget.md`.\n")
    if budget.draft_pool_note:
        lines.append(f'\n!!! warning "Draft pool"\n    {text(budget.draft_pool_note)}\n')
    return lines


def ranges_text(schedule: ResolvedSchedule) -> str:
    """A schedule's ranges in one line of the page ("1–8: K 3, 9–64: K 1"), and what its
    K = 0 ranges cost where it has one."""
    out = ", ".join(f"{r.start}–{r.end}: K {r.k}" for r in schedule.ranges)
    if schedule.k0_cost and any(r.k == 0 for r in schedule.ranges):
        out += f" ({text(schedule.k0_cost)})"
    return out


def _break_even_section(a: Analysis, latency: LatencyModel, charts_out: dict[str, bytes]) -> str:
    pair = a.pair
    lines = [f"![Expected speedup against acceptance]({pair.name}/speedup.svg){CHART}\n\n"]
    lines.append(f"![Break-even acceptance against concurrency]({pair.name}/break-even.svg)"
                 f"{CHART}\n\n")
    verdict_kind = {"pass": "success", "uncertain": "warning"}.get(latency.slo_status,
                                                                   "failure")
    lines.append(f'!!! {verdict_kind} "SLO against break-even"\n    {text(latency.slo_verdict)}\n')
    if a.schedule.schedule is not None:
        charts_out["schedule.svg"] = charts.schedule(a.schedule)
        lines.append(f"\n![Expected speedup of each static K and of the schedule against "
                     f"concurrency]({pair.name}/schedule.svg){CHART}\n\n"
                     f"Speculation schedule ({text(a.schedule.requested)}): "
                     + ranges_text(a.schedule.schedule)
                     + ". Every range and why: `generated/breakeven.md`.\n")
    elif a.schedule.refusal:
        lines.append(f"\nNo speculation schedule: {text(a.schedule.refusal)}.\n")
    return "".join(lines)


def _rest(a: Analysis, lines: list[str], charts_out: dict[str, bytes], changes: str | None,
          failures: list[Finding]) -> tuple[str, dict[str, bytes], dict[str, object]]:
    """The page from its staging plan on, and the index's summary of the pair."""
    pair, rb, budget, staging, findings = a.pair, a.pair.runbook, a.budget, a.staging, \
        a.findings
    lines.append(_table(["step", "seconds", "detail"], [
        [text(s.name), f"{s.seconds:g}", text(s.detail)] for s in staging.steps]
        + [["cold start", f"{staging.cold_start_s:g}", text(staging.verdict)]]))
    lines.append(f"\nOrder: {' → '.join(staging.order)}; warmup prompt "
                 f"<code>{text(rb.staging.warmup.prompt)}</code>; all steps in "
                 "`generated/stage-and-launch.sh`.\n")
    lines.append("\n## Checks\n\n")
    lines.append(_table(["rule", "level", "finding", "fix or waiver"], [
        [f.rule, "waived" if f.waived else f.severity, text(f.message),
         text(f.waived or f.hint)] for f in findings]) if findings else "No findings.\n")
    lines.append("\n## Change checklist\n\n")
    lines.append(changes or "No change to this pair in the compared revisions.\n")
    lines.append("\n## Pair card\n\n")
    card = card_files.render_markdown(pair, staging, escape=text)
    lines.append(card.split("\n", 1)[1].strip() + "\n")  # drop its title
    lines.append("\n## Provenance\n\n")
    prov = []
    for role in ("target", "draft"):
        art = getattr(pair, role)
        if art is None:
            continue
        for fact, where in sorted(art.sources.items()):
            prov.append([role, text(fact), text(where)])
        for fact in art.unconfirmed:
            prov.append([role, text(fact), "declared, unconfirmed"])
        for fact in art.overridden:
            prov.append([role, text(f"geometry.{fact}"), "declared in runbook"])
        prov.append([role, "lock", text(art.provenance)])
    lines.append(_table(["artifact", "fact", "source"], prov))
    summary: dict[str, object] = {"name": pair.name, "title": rb.pair.title, "engine": pair.engine,
               "method": rb.speculation.method.value, "gpu": pair.gpu,
               "slo": rb.acceptance.slo.min_length,
               "break_even": None if a.modelled is None else a.modelled.at_concurrency.break_even,
               "draft_share": budget.draft_share_of_kv_pct, "failing": len(failures)}
    return "".join(lines), charts_out, summary


BELOW_BREAK_EVEN = "SpecpairBelowBreakEven"


def _plan_section(a: Analysis, files: dict[str, bytes]) -> str:
    """`specpair plan` with the runbook's own GPU and concurrency: the ranked candidates
    and the Pareto front as a chart."""
    from specpair.generate import plan_report

    if a.not_modelled is not None:  # the planner scores candidates with the step model
        return f'\n## Plan\n\n!!! warning "Plan"\n    {text(a.not_modelled)}\n'
    pair, found = a.pair, a.plan_search
    points = [(r.tokens_per_s_per_request, r.tokens_per_s_per_gpu, r.depth > 0, False)
              for r in found.rows if r.passes_check]
    points += [(f.tokens_per_s_per_request, f.tokens_per_s_per_gpu, f.speculative, True)
               for f in found.front]
    files["plan-front.svg"] = charts.plan_front(points, f"{pair.gpu}, {pair.engine}")
    body = plan_report.markdown(found, top=5, esc=text, site=True)
    return ("\n## Plan\n\n" + f"![Throughput per GPU against speed per request]"
            f"({pair.name}/plan-front.svg){CHART}\n\n" + body)


def _alerts_section(a: Analysis, files: dict[str, bytes]) -> str:
    """The alert thresholds and links to the rules, manifest and dashboard (copied beside
    the page so the links resolve on the site)."""
    from specpair.analyse.alerts import detection, watches_first_request
    from specpair.analyse.capacity import notes
    from specpair.analyse.monitoring import for_engine

    pair, t = a.pair, a.thresholds
    generated = {**monitoring_files.generate(a), **dashboard_files.generate(a),
                 **autoscaler_files.generate(a)}
    files.update(generated)
    metrics = for_engine(pair.engine, pair.source_file)
    w = pair.runbook.alerts
    rows = [
        ["SpecpairAcceptanceBelowSLO", f"p{t.percentile} of the {w.slo_window} τ over "
         f"{w.slo_lookback} &lt; {t.slo_min:g} for {w.slo_for} (SLO {text(t.scope)}, basis "
         f"{text(t.basis)})"]]
    if t.break_even is not None:  # not generated where not modelled
        rows.append(["SpecpairBelowBreakEven", f"{w.break_even_window} τ &lt; τ\\* at the "
                     f"running concurrency for {w.break_even_for} ({t.break_even:.2f} at "
                     f"concurrency {t.concurrency})"])
    rows += [
        ["SpecpairSpeculationStopped", "tokens generated while the verify counter stands still"],
        ["SpecpairSpeculativeSeriesMissing", "tokens generated without speculative series"],
        ["SpecpairNotReadyWithinColdStartBudget",
         f"no answer for the cold-start budget, {t.cold_start_budget_s:g} s (planned "
         f"{t.cold_start_plan_s:g} s)"]]
    if metrics.startup_seconds:
        rows.append(["SpecpairEngineStartupOverBudget",
                     f"engine start-up &gt; {t.cold_start_budget_s:g} s"])
    if watches_first_request(pair, metrics):
        rows.append(["SpecpairFirstRequestOverColdStartBudget",
                     f"first request &gt; {t.cold_start_budget_s:g} s after the process start "
                     "(where Prometheus saw the process with no finished request yet)"])
    links = " · ".join(f"[{name}]({pair.name}/{name})" for name in sorted(generated))
    return ("\n## Alerts and dashboard\n\n"
            + _table(["alert", "fires when"], rows)
            + f"\n{prose(metrics.per_request)}; the SLO alert watches {w.slo_window} "
            "windows.\n\n"
            + ("" if t.not_modelled is None else
               f"No break-even alert; the break-even τ* is {text(t.not_modelled)}.\n\n")
            + "Detection delay (the runbook's `alerts` windows): "
            + "; ".join(text(line) for line in detection(pair)
                        if t.break_even is not None or not line.startswith(BELOW_BREAK_EVEN))
            + ".\n\nCapacity and autoscaling: "
            + " ".join(text(line) for line in notes(pair, a.capacity, a.capacity_omitted))
            + f"\n\nFiles: {links} (also in `generated/`).\n")


def vocabulary_section(m: VocabMapping) -> str:
    """The heterogeneous-vocabulary mode's intersection, in the engine's own terms."""
    size = num(m.intersection) + (f"-{num(m.intersection_max)}" if m.intersection_max else "")

    def fallback(fb: Fallback | None) -> str:
        return "none: the engine refuses to start" if fb is None else \
            f"{text(fb.kind)}_token_id {fb.token_id}"

    rows = [["target vocabulary (config vocab_size)", num(m.target_vocab)],
            ["draft vocabulary (config vocab_size)", num(m.draft_vocab)],
            ["intersection", f"{size} tokens: {m.pct_of_draft}% of the draft's, "
                             f"{m.pct_of_target}% of the target's"],
            ["word-start markers", f"target {text(' '.join(m.target_markers))}, "
                                   f"draft {text(' '.join(m.draft_markers))}"],
            ["unmapped draft proposals become", fallback(m.target_fallback)],
            ["unmapped target tokens fed to the draft become", fallback(m.draft_fallback)]]
    rows += [[text(k), "maps to a draft token" if ok else "no draft counterpart"]
             for k, ok in sorted(m.special_mapped.items())]
    out = ["\n## Vocabulary intersection\n\n",
           "vLLM's heterogeneous-vocabulary mode (Token-Level Intersection): the draft "
           "proposes only tokens both vocabularies share after word-start normalisation; "
           "greedy drafting, any request sampling.\n\n", _table(["", ""], rows)]
    if m.unconfirmed:
        out.append(f"\nDeclared and unconfirmed: {text(', '.join(m.unconfirmed))}.\n")
    for fact, where in sorted(m.sources.items()):
        out.append(f"\n- {text(fact)}: {text(where)}")
    return "".join(out) + "\n"


def _indent(block: str) -> str:
    return "".join(f"    {line}" if line.strip() else line
                   for line in block.splitlines(keepends=True)) + "\n"


def _artifact(pair: ResolvedPair, role: str) -> str:
    art = getattr(pair, role)
    spec = getattr(pair.runbook, role)
    if art is None:
        return "none (NGRAM drafts from the prompt)"
    if art.bundled:
        return "built into the target checkpoint"
    name = spec.repo or spec.path
    return f"<code>{text(name)}</code> @ <code>{text(spec.revision or 'local')}</code>"


def index_page(summaries: list[dict[str, object]]) -> str:
    rows = [[f"[{text(s['title'])}]({s['name']}.md)", text(s["engine"]), text(s["method"]),
             text(s["gpu"]), f"{s['slo']:g} vs " + ("not modelled" if s["break_even"] is None
                                                   else f"{s['break_even']:.2f}"),
             f"{s['draft_share']}%", "pass" if not s["failing"] else f"FAIL ({s['failing']})"]
            for s in summaries]
    return (front_matter("Pairs", None)
            + "# Pairs\n\nEvery target/draft pair in `runbooks/`, generated by specpair.\n\n"
            + _table(["pair", "engine", "method", "GPU", "SLO τ vs break-even τ*",
                      "draft share of KV", "checks"], rows)
            + "\nHow well the break-even model predicts published measurements: "
              "[How good is the latency model](../model/latency-model.md).\n")


GC_YOUNG = 10_000
"""Allocations between two collections of the youngest generation while the pages are
generated (CPython's default: 700). The plan search allocates millions of short-lived
objects (variants, budgets, findings) beside a heap of long-lived ones (loaded pairs, the
value memos): at the default, the collector took 23% of the CPU of an N=100 examples
catalogue (2310 collections, 18 of the whole heap), at 10 000 8% (185, 2 of the whole
heap), with the same peak memory (benchmarks/site_scale.py)."""


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cyclic collector run less often, restored afterwards (it frees only reference
    cycles; what the pages contain does not depend on when it runs)."""
    saved = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def render(pairs: list[ResolvedPair], changes: dict[str, str],
           cache: Path | None = None) -> Outputs:
    """Every page; with `cache` (a folder), a pair whose inputs are unchanged since the
    run that filled it is copied from there instead of planned and drawn again."""
    with _fewer_collections():
        return _render(pairs, changes, cache)


def _render(pairs: list[ResolvedPair], changes: dict[str, str],
            cache: Path | None) -> Outputs:
    from specpair.write.page_cache import PageCache, key

    outputs = Outputs()
    outputs.owned_dirs.add(PAGES)
    summaries = []
    problems = []
    pages = PageCache(cache) if cache is not None else None
    for pair in pairs:
        name = key("pair-page", pair.model_dump(mode="json"), changes.get(pair.name))
        hit = pages.get(name) if pages is not None else None
        try:
            page, svgs, summary = hit or pair_page(Analysis(pair), changes.get(pair.name))
        except SpecpairError as exc:
            problems.extend(exc.problems)
            continue
        if pages is not None and hit is None:
            pages.put(name, page, svgs, summary)
        outputs.add(PAGES / f"{pair.name}.md", page.encode())
        for name, content in svgs.items():
            outputs.add(PAGES / pair.name / name, content)
        summaries.append(summary)
    if problems:
        raise SpecpairError(problems)
    if pages is not None:
        pages.prune()
    outputs.add(PAGES / "index.md", index_page(summaries).encode())
    from specpair.generate import latency_page

    latency_text, latency_svgs = latency_page.page()
    outputs.owned_dirs.add(MODEL)
    outputs.add(MODEL / "latency-model.md", latency_text.encode())
    for name, content in latency_svgs.items():
        outputs.add(MODEL / "latency-model" / name, content)
    return outputs


def changes_by_pair(root: Path, base: str) -> dict[str, str]:
    from specpair.commands.impact import impact

    impacts, _ = impact(root, base, None)
    out = {}
    for item in impacts:
        body = "".join(f"- [ ] {text(line)}\n" for line in item.checklist)
        out[item.name] = (f"Compared with <code>{text(base)}</code> "
                          f"({', '.join(item.classes)}):\n\n{body}")
    return out
