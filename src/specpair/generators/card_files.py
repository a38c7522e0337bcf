"""The pair card (`card.md`, `card.json`): what the latest measurement says, per workload
and concurrency: speedup over the baseline, acceptance against the SLO, TTFT change, and
a verdict. It names the workloads it tested: conclusions do not carry over to others."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specpair.analysis import Analysis
from specpair.bench.record import Cell, Measurement, percentile
from specpair.generators.plan_files import measured_markdown, measured_of, unverified_lines
from specpair.registry import declared_notes
from specpair.render import cell as esc
from specpair.render import table
from specpair.resolve import ResolvedPair
from specpair.staging import StagingPlan
from specpair.writer import dump_json

CAVEAT = ("Measured on the workloads named here only. Acceptance, and so speedup, depends "
          "on the traffic: conclusions do not carry over to other workloads, prompt "
          "mixes or concurrencies.")


def judge(pair: ResolvedPair, c: Cell) -> dict[str, Any]:
    slo = pair.runbook.acceptance.slo
    base, spec = c.baseline, c.speculative
    tpot_b, tpot_s = base.tpot_s.mean, spec.tpot_s.mean
    speedup = round(tpot_b / tpot_s, 3) if tpot_b and tpot_s else None
    ttft_b, ttft_s = base.ttft_s.p50, spec.ttft_s.p50
    ttft_change = round(100 * (ttft_s - ttft_b) / ttft_b, 1) if ttft_b and ttft_s else None
    if slo.scope == "per_request" and spec.acceptance_per_request:
        acceptance = percentile(spec.acceptance_per_request, slo.percentile)
        basis = f"p{slo.percentile} per request"
    else:
        acceptance = spec.acceptance_aggregate
        basis = "aggregate (counters)" + (
            "; per-request values not offered by the engine" if slo.scope == "per_request"
            else "")
    meets = acceptance is not None and acceptance >= slo.min_length
    if spec.failed or base.failed or spec.truncated or base.truncated:
        verdict = "incomplete: failed or truncated requests"
    elif speedup is None or speedup <= 1.0:
        verdict = "reject: not faster than the baseline"
    elif not meets:
        verdict = "reject: acceptance below the SLO"
    else:
        verdict = "accept"
    return {"workload": c.workload, "concurrency": c.concurrency,
            "speedup_tpot": speedup,
            "throughput_ratio": round(spec.output_throughput / base.output_throughput, 3)
            if base.output_throughput else None,
            "ttft_change_pct": ttft_change, "acceptance": acceptance,
            "acceptance_basis": basis, "slo_min_length": slo.min_length, "meets_slo": meets,
            "draft_length": _draft_length(spec.counters), "verdict": verdict}


def _draft_length(counters: dict[str, float]) -> float | None:
    """Drafted tokens per draft from the engine's counters: the K it ran (a schedule's
    changes with the load); None where the engine does not count drafted tokens."""
    steps, drafted = counters.get("verify_steps"), counters.get("drafted")
    return round(drafted / steps, 3) if steps and drafted else None


def render_markdown(pair: ResolvedPair, staging: StagingPlan,
                    escape: Callable[[object], str] = esc) -> str:
    """card.md's text; `escape` makes runbook and record text inert for where it lands
    (the site passes its stricter Markdown escaping). A recorded start adds the measured
    against modelled cold start."""
    cold = measured_of(pair, staging)
    tail = measured_markdown(cold, escape=escape) if cold is not None else ""
    # the card's capacity and break-even come from the budget: say when it is unverified
    head = "".join(unverified_lines(pair, escape))
    m = pair.measurement
    if m is None:
        return (f"# Pair card: {escape(pair.runbook.pair.title)}\n\n{head}Not measured yet. "
                "Run the measurement protocol against a baseline and a speculative server started "
                "from the generated launch scripts:\n\n```sh\nspecpair bench "
                f"{pair.source_file} --baseline http://HOST:PORT --spec http://HOST:PORT "
                "--concurrency 1,4,16\n```\n" + tail)
    card = markdown(pair, m, [judge(pair, c) for c in m.cells], escape)
    title, _, rest = card.partition("\n\n")
    return f"{title}\n\n{head}{rest}" + tail


def generate(a: Analysis) -> dict[str, bytes]:
    pair = a.pair
    m = pair.measurement
    data: dict[str, Any] = {"pair": pair.name, "measured": False}
    if m is not None:
        data = {"pair": pair.name, "measured": True, "measured_at": m.started_at,
                "engine": m.protocol.engine, "target": m.protocol.target,
                "draft": m.protocol.draft, "results": [judge(pair, c) for c in m.cells],
                "caveat": CAVEAT}
    cold = measured_of(pair, a.staging)
    if cold is not None:
        data["cold_start"] = cold.model_dump(mode="json")
    if declared_notes(pair):  # only pairs that declare an unverified layout carry the key
        data["unverified"] = declared_notes(pair)
    return {"card.json": dump_json(data), "card.md": render_markdown(pair, a.staging).encode()}


def _num(x: float | None, suffix: str = "") -> str:
    return "–" if x is None else f"{x:g}{suffix}"


def markdown(pair: ResolvedPair, m: Measurement, rows: list[dict[str, Any]],
             esc: Callable[[object], str] = esc) -> str:
    tested = ", ".join(f"{w['name']} ({w['kind']})" for w in m.protocol.workloads)
    scheduled = pair.runbook.speculation.schedule is not None  # which K ran where
    target, draft = m.protocol.target, m.protocol.draft or {}
    out = [f"# Pair card: {esc(pair.runbook.pair.title)}\n\n",
           f"Measured {esc(m.started_at)} on {esc(m.protocol.engine)}; target "
           f"{esc(target.get('repo') or target.get('path'))}"
           f"@{esc(target.get('commit') or target.get('revision'))}",
           f", draft {esc(draft.get('repo') or draft.get('path'))}" if draft else "", ".\n\n",
           f"**Tested workloads:** {esc(tested)}.\n\n",
           table(["workload", "concurrency", "speedup (TPOT)", "throughput ×",
                  "TTFT change", "acceptance", "SLO", "verdict"]
                 + (["draft length (drafted / drafts)"] if scheduled else []),
                 [[esc(r["workload"]), str(r["concurrency"]), _num(r["speedup_tpot"], "×"),
                   _num(r["throughput_ratio"], "×"), _num(r["ttft_change_pct"], "%"),
                   f"{_num(r['acceptance'])} ({esc(r['acceptance_basis'])})",
                   f"≥ {r['slo_min_length']:g}", esc(r["verdict"])]
                  + ([_num(r.get("draft_length"))] if scheduled else []) for r in rows]),
           f"\n> {CAVEAT}\n"]
    return "".join(out)
