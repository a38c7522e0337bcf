"""Acceptance and staging outputs: `breakeven.{md,json}`, `staging.{md,json}` and
`stage-and-launch.sh` (generators/stage_script.py), the script that pre-stages both pinned
artifacts, verifies them, launches, waits for /health and sends the warmup request, failing
loudly at any step and logging every phase."""

from __future__ import annotations

from specpair.budget import compute
from specpair.generators.stage_script import stage_script
from specpair.latency import LatencyModel, model
from specpair.render import cell, num, table
from specpair.resolve import ResolvedPair
from specpair.staging import StagingPlan, plan
from specpair.writer import dump_json


def generate(pair: ResolvedPair) -> dict[str, bytes]:
    latency = model(pair, compute(pair))
    staging = plan(pair)
    return {
        "breakeven.json": dump_json(latency.model_dump(mode="json")),
        "breakeven.md": breakeven_markdown(pair, latency).encode(),
        "staging.json": dump_json(staging.model_dump(mode="json")),
        "staging.md": staging_markdown(pair, staging).encode(),
        "stage-and-launch.sh": stage_script(pair, staging).encode(),
    }


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def breakeven_markdown(pair: ResolvedPair, m: LatencyModel) -> str:
    rb = pair.runbook
    here = m.at_concurrency
    out = [f"# Acceptance and break-even: {cell(rb.pair.title)}\n\n",
           f"Method **{m.method}**: {m.draft_passes} draft forward(s) of "
           f"{m.tokens_per_draft_pass} token(s) per sequence, verify width {m.verify_width}, "
           f"at most {m.max_tokens_per_step} tokens per step.\n\n",
           table(["", "value"], [
               ["break-even τ* at concurrency " + str(m.concurrency), _f(here.break_even)],
               ["acceptance SLO (min τ, " + rb.acceptance.slo.scope.replace("_", " ")
                + f", p{rb.acceptance.slo.percentile})", _f(m.slo)],
               ["reference acceptance", _f(m.reference) + (
                   f" ({cell(rb.acceptance.reference.source)})" if rb.acceptance.reference
                   else "")],
               ["expected speedup at the SLO", _f(here.speedup_at_slo) + "×"],
               ["expected speedup at the reference", _f(here.speedup_at_reference) + "×"],
               [f"speculation stops paying (at the SLO) above concurrency {m.concurrency} at",
                str(m.stops_paying_at_slo or "never (up to 4096)")],
               ["concurrencies without gain at the SLO",
                ", ".join(map(str, m.no_gain_at_slo)) or "none"],
               ["verdict", ("✅ " if m.slo_ok else "❌ ") + cell(m.slo_verdict)],
           ]),
           "\n## Break-even and speedup by concurrency\n\n",
           table(["concurrency", "τ*", "T decode (ms)", "T draft (ms)", "T verify (ms)",
                  "speedup at SLO", "speedup at reference"],
                 [[str(p.concurrency), _f(p.break_even), f"{p.t_decode_s * 1e3:.2f}",
                   f"{p.t_draft_s * 1e3:.2f}", f"{p.t_verify_s * 1e3:.2f}",
                   _f(p.speedup_at_slo), _f(p.speedup_at_reference)] for p in m.curve]),
           "\n## Model\n\nS(τ, B) = τ · T_decode / (T_draft + T_verify); τ* = (T_draft + "
           "T_verify) / T_decode; each forward costs max(bytes / bandwidth, FLOPs / peak) per "
           "rank. Assumptions:\n\n"]
    out += [f"- {cell(a)}\n" for a in m.assumptions]
    return "".join(out)


def staging_markdown(pair: ResolvedPair, s: StagingPlan) -> str:
    rows = [[cell(step.name), f"{step.seconds:,.1f}", cell(step.detail)] for step in s.steps]
    rows.append(["**cold start**", f"**{s.cold_start_s:,.1f}**",
                 ("✅ " if s.fits else "❌ ") + cell(s.verdict)])
    out = [f"# Staging plan: {cell(pair.runbook.pair.title)}\n\n",
           f"Mode **{s.mode}**, order {' → '.join(s.order)}. Download sizes: "
           + ", ".join(f"{role} {num(b)} B" for role, b in s.artifacts.items()) + ".\n\n",
           table(["step", "seconds", "detail"], rows)]
    if s.alternatives:
        out.append("\nOther modes, same assumptions: " + ", ".join(
            f"{mode} {sec:,.1f} s" for mode, sec in s.alternatives.items()) + ".\n")
    out.append(f"\nWarmup check: `{cell(s.warmup['prompt'])}`, {s.warmup['max_tokens']} tokens, "
               f"fails after {s.warmup['timeout_s']} s. `stage-and-launch.sh` runs these "
               "steps and stops at the first failure.\n")
    return "".join(out)
