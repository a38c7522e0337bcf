"""Acceptance and staging outputs: `breakeven.{md,json}`, `staging.{md,json}` and
`stage-and-launch.sh`, the script that pre-stages both pinned artifacts, verifies them,
launches, waits for /health and sends the warmup request, failing loudly at any step."""

from __future__ import annotations

import shlex

from specpair.budget import compute
from specpair.generators.launch_files import cell_text, slug
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
    stops = (str(m.stops_paying_at_slo) if m.stops_paying_at_slo is not None
             else f"not within what this deployment can run (up to {m.capacity})")
    at = f"concurrency {m.concurrency}" + (
        f" (runbook: {m.requested_concurrency}; the deployment holds {m.capacity})"
        if m.requested_concurrency > m.capacity else "")
    out = [f"# Acceptance and break-even: {cell(rb.pair.title)}\n\n",
           f"Method **{m.method}**: {m.draft_passes} draft forward(s) of "
           f"{m.tokens_per_draft_pass} token(s) per sequence, verify width {m.verify_width}, "
           f"at most {m.max_tokens_per_step} tokens per step. Expected context "
           f"{m.expected_context:,} tokens per sequence; the deployment holds {m.capacity} "
           f"concurrent sequences at that context ({cell(m.capacity_reason)}).\n\n",
           table(["", "value"], [
               ["break-even τ* at " + at, _f(here.break_even)],
               ["acceptance SLO (min τ, " + rb.acceptance.slo.scope.replace("_", " ")
                + f", p{rb.acceptance.slo.percentile})", _f(m.slo)],
               ["reference acceptance", _f(m.reference) + (
                   f" ({cell(rb.acceptance.reference.source)})" if rb.acceptance.reference
                   else "")],
               ["expected speedup at the SLO", _f(here.speedup_at_slo) + "×"],
               ["expected speedup at the reference", _f(here.speedup_at_reference) + "×"],
               [f"speculation stops paying (at the SLO) above concurrency {m.concurrency} at",
                stops],
               ["concurrencies without gain at the SLO",
                ", ".join(map(str, m.no_gain_at_slo)) or "none"],
               ["verdict", ("✅ " if m.slo_ok else "❌ ") + cell(m.slo_verdict)],
           ])]
    if m.hints:
        out.append("\nWhat to change:\n\n" + "".join(f"- {cell(h)}\n" for h in m.hints))
    out += ["\n## Break-even and speedup by concurrency\n\n",
            f"Up to the {m.capacity} sequences the deployment holds. T decode includes "
            "the per-output-token cost once; a speculative step pays T draft + T verify + "
            "τ × that cost.\n\n",
            table(["concurrency", "τ*", "T decode (ms)", "T draft (ms)", "T verify (ms)",
                   "speedup at SLO", "speedup at reference"],
                  [[str(p.concurrency), _f(p.break_even), f"{p.t_decode_s * 1e3:.2f}",
                    f"{p.t_draft_s * 1e3:.2f}", f"{p.t_verify_s * 1e3:.2f}",
                    _f(p.speedup_at_slo), _f(p.speedup_at_reference)] for p in m.curve]),
            "\n## Model\n\nS(τ, B) = τ · T_decode / (T_draft + T_verify); τ* = (T_draft + "
            "T_verify) / T_decode; each forward costs a fixed part plus max(bytes / (η_bw · "
            "bandwidth), FLOPs / (η_f · peak)) per rank. Parameters: "
            f"{cell(m.parameters.values.describe())} ({cell(m.parameters.source)}). "
            "How well this model predicts published measurements: the site page \"How good "
            "is the latency model\". Assumptions:\n\n"]
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


STAGE_TEMPLATE = r'''
fail() { echo "stage-and-launch: $*" >&2; exit 1; }
command -v hf >/dev/null || fail "the hf command (huggingface_hub) is not installed"
stage() {  # repo revision → the snapshot folder, verified
  local dir
  dir=$(hf download "$1" --revision "$2" --quiet) || fail "download of $1@$2 failed"
  [ -f "$dir/config.json" ] || fail "$1@$2 has no config.json"
  compgen -G "$dir/*.safetensors" >/dev/null || fail "$1@$2 has no safetensors weights"
  echo "staged $1@$2 in $dir"
}
check_local() { [ -f "$1/config.json" ] || fail "local checkpoint $1 has no config.json"; }
'''

WAIT_AND_WARM = r'''
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
python3 - "$PORT" "$HEALTH" "$HEALTH_TIMEOUT" \
  "$WARMUP_PROMPT" "$WARMUP_TOKENS" "$WARMUP_TIMEOUT" <<'PY' || fail "not ready (see $LOG)"
import json, sys, time, urllib.request as u
port, health, wait_s, prompt, n, warm_s = sys.argv[1:7]
base = "http://127.0.0.1:" + port
end = time.time() + float(wait_s)
while True:
    try:
        if u.urlopen(base + health, timeout=5).status == 200:
            break
    except Exception:
        pass
    if time.time() > end:
        sys.exit("no answer on " + health + " within " + wait_s + " s")
    time.sleep(2)
body = json.dumps({"model": "default", "prompt": prompt, "max_tokens": int(n),
                   "temperature": 0}).encode()
req = u.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
out = json.load(u.urlopen(req, timeout=float(warm_s)))
if not out.get("choices"):
    sys.exit("warmup returned no completion")
print("ready: /health answered and the warmup completion returned")
PY
trap - EXIT
wait "$server"
'''


def stage_script(pair: ResolvedPair, s: StagingPlan) -> str:
    rb = pair.runbook
    engine = slug(pair.engine)
    lines = ["#!/usr/bin/env bash",
             f"# {cell_text(rb.pair.title)}: stage both pinned artifacts, verify, launch, "
             "wait for /health, warm up.",
             f"# Generated by specpair from {pair.source_file}; do not edit.",
             "set -euo pipefail",
             'HERE=$(cd "$(dirname "$0")" && pwd)',
             f"PORT={rb.deployment.port}",
             "HEALTH=/health",
             f"HEALTH_TIMEOUT={int(rb.staging.cold_start_budget_s)}",
             f"WARMUP_PROMPT={shlex.quote(rb.staging.warmup.prompt)}",
             f"WARMUP_TOKENS={rb.staging.warmup.max_tokens}",
             f"WARMUP_TIMEOUT={rb.staging.warmup.timeout_s:g}",
             'LOG="${LOG:-server.log}"']
    lines.append(STAGE_TEMPLATE.strip("\n"))
    arts = {"target": rb.target, "draft": rb.draft}
    calls = []
    for role in s.order:
        art = arts[role]
        if art is None:
            continue
        if art.repo is not None:
            calls.append(f"stage {shlex.quote(art.repo)} {shlex.quote(art.revision or 'main')}")
        elif art.path is not None:
            calls.append(f"check_local {shlex.quote(art.path)}")
    if s.mode == "parallel-prestage" and len(calls) > 1:
        lines.append("# both artifacts at once; any failure stops the script")
        lines.append("pids=()")
        for call in calls:
            lines.append(f"{call} & pids+=($!)")
        lines.append('for pid in "${pids[@]}"; do wait "$pid" || fail "staging failed"; done')
    elif s.mode == "engine-prefetch":
        lines.append("# engine-prefetch: the engine streams shards itself; only local paths "
                     "are checked")
        lines += [c for c in calls if c.startswith("check_local")]
    else:
        lines += calls
    lines.append(f'bash "$HERE/launch-{engine}.sh" >"$LOG" 2>&1 &')
    lines.append(WAIT_AND_WARM.strip("\n"))
    return "\n".join(lines) + "\n"
