"""The pair card (`card.md`, `card.json`): what the latest measurement says, per workload
and concurrency: speedup over the baseline, acceptance against the SLO, TTFT change, and
a verdict. It names the workloads it tested: conclusions do not carry over to others."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specpair.analyse.analysis import Analysis
from specpair.analyse.staging import StagingPlan
from specpair.bench.record import Cell, Measurement, percentile
from specpair.engines.verified_layouts import declared_notes
from specpair.generate.plan_files import measured_markdown, measured_of, unverified_lines
from specpair.generate.render import cell as esc
from specpair.generate.render import dump_json, table
from specpair.resolve.pair import ResolvedPair

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


Z95 = 1.96
"""Two-sided 95% normal quantile: a server's mean TPOT ± Z95 · its standard error."""
ROLES = ("speculative", "static", "baseline")


def _label(role: str, static_k: int | None) -> str:
    return {"speculative": "schedule", "baseline": "target alone"}.get(
        role, f"static K={static_k}" if static_k is not None else "static K")


def _static_k(m: Measurement) -> int | None:
    """The static server's K from its counters' positions, else the record's description."""
    import re

    for c in m.cells:
        if c.static is not None and c.static.accepted_per_position:
            return len(c.static.accepted_per_position)
    found = re.search(r"static K = (\d+)", m.protocol.servers.get("static", ""))
    return int(found.group(1)) if found else None


def compare(c: Cell, static_k: int | None = None) -> dict[str, Any]:
    """One cell's schedule, static K and target alone side by side, and which wins there:
    the lowest mean TPOT (each request's decode time per output token), unless another
    server's mean lies within the 95% interval of the difference (Z95 · √(se₁² + se₂²),
    the standard errors over requests the record holds): then a tie. Tokens/s (whole
    run) and speedup over the target alone are shown beside; the record has no interval
    for them."""
    runs = {"speculative": c.speculative, "static": c.static, "baseline": c.baseline}
    base_tpot = c.baseline.tpot_s.mean
    servers: dict[str, Any] = {}
    for role, r in runs.items():
        if r is None:
            servers[role] = None
            continue
        mean, sem = r.tpot_s.mean, r.tpot_s.sem
        servers[role] = {
            "tokens_per_s": r.output_throughput, "tpot_mean_s": mean,
            "tpot_ci95_s": round(Z95 * sem, 6) if sem is not None else None,
            "speedup_tpot": round(base_tpot / mean, 3) if base_tpot and mean else None,
            "draft_length": _draft_length(r.counters) if role != "baseline" else None,
            "complete": not (r.failed or r.truncated or not r.succeeded)}
    row: dict[str, Any] = {"workload": c.workload, "concurrency": c.concurrency,
                           "servers": servers, "winner": None, "tied": [],
                           "basis": "mean TPOT, 95% interval over requests"}
    measured = {role: v for role, v in servers.items() if v is not None}
    if any(not v["complete"] or v["tpot_mean_s"] is None for v in measured.values()):
        row["winner"] = "incomplete: failed or truncated requests"
        return row
    best = min(measured, key=lambda role: measured[role]["tpot_mean_s"])
    if any(v["tpot_ci95_s"] is None for v in measured.values()):
        row["winner"] = _label(best, static_k)
        row["basis"] = "mean TPOT; no interval in the record: point estimate only"
        return row
    b = measured[best]
    tied = [role for role, v in measured.items() if role != best and
            v["tpot_mean_s"] - b["tpot_mean_s"]
            <= (v["tpot_ci95_s"] ** 2 + b["tpot_ci95_s"] ** 2) ** 0.5]
    if tied:
        row["tied"] = [_label(r, static_k) for r in ROLES if r == best or r in tied]
        row["winner"] = "tie"
    else:
        row["winner"] = _label(best, static_k)
    return row


def comparison(pair: ResolvedPair, m: Measurement) -> list[dict[str, Any]] | None:
    """The "which wins where" rows of a scheduled pair's record (None for a static pair)."""
    if pair.runbook.speculation.schedule is None and all(c.static is None for c in m.cells):
        return None
    k = _static_k(m)
    return [compare(c, k) for c in m.cells if c.replay is None]


def _server_cell(v: dict[str, Any] | None) -> str:
    if v is None:
        return "not measured"
    ci = f" ± {v['tpot_ci95_s'] * 1000:.2g}" if v["tpot_ci95_s"] is not None else ""
    speed = f", {v['speedup_tpot']:g}×" if v["speedup_tpot"] is not None else ""
    return f"{v['tokens_per_s']:g} tok/s, TPOT {v['tpot_mean_s'] * 1000:.3g}{ci} ms{speed}"


def comparison_markdown(rows: list[dict[str, Any]], static_k: int | None,
                        esc: Callable[[object], str] = esc) -> str:
    head = ["workload", "concurrency", "schedule", _label("static", static_k),
            "target alone", "wins"]
    body = [[esc(r["workload"]), str(r["concurrency"]),
             *(_server_cell(r["servers"][role]) for role in ROLES),
             esc("tie: " + ", ".join(r["tied"]) if r["winner"] == "tie" else r["winner"])]
            for r in rows]
    return ("\n### Which wins where: schedule, static K, target alone\n\n"
            "Per server: output tokens/s over the whole run, mean TPOT ± its 95% interval "
            "over requests, speedup (TPOT) over the target alone. The lowest mean TPOT wins "
            "unless another server lies within the interval of the difference: a tie."
            + (" The static K server was not measured (`specpair bench --static URL`)."
               if any(r["servers"]["static"] is None for r in rows) else "")
            + "\n\n" + table(head, body))


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
        scheduled = pair.runbook.speculation.schedule is not None
        return (f"# Pair card: {escape(pair.runbook.pair.title)}\n\n{head}Not measured yet. "
                "Run the measurement protocol against a baseline and a speculative server started "
                "from the generated launch scripts:\n\n```sh\nspecpair bench "
                f"{pair.source_file} --baseline http://HOST:PORT --spec http://HOST:PORT "
                + ("--static http://HOST:PORT\n```\n\nWhich wins where (schedule, static K, "
                   "target alone): not measured. `--static` is the server of the generated "
                   "`launch-*-static.sh` (the schedule's largest K without the schedule); "
                   "without --concurrency the run measures at the schedule's switch "
                   "points.\n" if scheduled else "--concurrency 1,4,16\n```\n") + tail)
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
        rows = comparison(pair, m)
        if rows is not None:
            data["servers"] = m.protocol.servers
            data["which_wins"] = rows
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
    rows_wins = comparison(pair, m)
    if rows_wins is not None:
        out.append(comparison_markdown(rows_wins, _static_k(m), esc))
    return "".join(out)
