"""`stage-and-launch.sh` and the Kubernetes staging commands, both writing the deployment
log of specpair.load.staging_log: one JSON line per phase with a short human line before it.

The script needs bash (≥ 5.0 for $EPOCHREALTIME), coreutils, python3 (byte counts, the
warmup request) and the `hf` command of huggingface_hub; /health is probed over bash's
own /dev/tcp. Every runbook value reaches it as one shlex-quoted word.

Once both pinned artifacts sit in the hub cache, the engine starts with HF_HUB_OFFLINE=1:
it must load what was staged and verified, not resolve the revisions again (a branch that
moved in between would load other weights than the staged ones).
"""

from __future__ import annotations

import shlex

from specpair.analyse.staging import HF_DOWNLOAD_WORKERS, StagingPlan
from specpair.engines.verified_layouts import marks
from specpair.generate.canary_gate import EXIT_CANARY, GATE_FUNCTIONS
from specpair.generate.shell_text import cell_text, slug
from specpair.load.staging_log import BASELINE_MARK, EXIT_STATUS, LOG_FORMAT
from specpair.resolve.pair import ResolvedPair

# Logging, shared by the script and the init container: emit HUMAN JSON_FIELDS prints
# the human line (unless --json) and the JSON line in one write, so lines of parallel
# downloads never interleave.
LOG_FUNCTIONS = r'''
us() { local t=${EPOCHREALTIME//[!0-9]/}; printf '%s' "$((10#$t))"; }
secs() { printf '%d.%03d' "$(($1 / 1000000))" "$(($1 % 1000000 / 1000))"; }
jstr() {  # a JSON string
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//[[:cntrl:]]/ }
  printf '"%s"' "$s"
}
emit() {
  local json
  json=$(printf '{"log":"%s","pair":%s,"t":%s,%s}' "$LOG_FORMAT" "$(jstr "$PAIR")" \
    "$(secs "$(($(us) - START_US))")" "$2")
  if [ "$JSON_ONLY" = 1 ]; then printf '%s\n' "$json"
  else printf '%s\n%s\n' "stage-and-launch: $1" "$json"; fi
}
sizes() {  # folder since_us: bytes of its files, and of those written since then
  python3 -c '
import os, sys
total = fresh = 0
since = int(sys.argv[2]) / 1e6
for folder, _, names in os.walk(sys.argv[1]):
    for name in names:
        st = os.stat(os.path.join(folder, name))
        total += st.st_size
        fresh += st.st_size if st.st_mtime >= since else 0
print(total, fresh)' "$1" "$2"
}
rate() { local b=$1 t=$2; [ "$t" -gt 0 ] || t=1; printf '%s' "$((b * 1000000 / t))"; }
why() {  # the error line of a message file (else its last line)
  local line last=""
  while IFS= read -r line; do
    case $line in *Error*) printf '%s' "$line"; return ;; esac
    [ -z "$line" ] || last=$line
  done <"$1"
  printf '%s' "$last"
}
stage() {  # role repo revision: download into the hub cache, verify, log the phase
  local t0 out dir err="" size fetched t errs="${TMPDIR:-/tmp}/stage-and-launch.$$.$1"
  t0=$(us)
  if ! out=$(hf download "$2" --revision "$3" --max-workers __WORKERS__ --quiet 2>"$errs"); then
    err="download of $2@$3 failed: $(why "$errs")"
  else
    dir=${out##*$'\n'}
    if [ ! -f "$dir/config.json" ]; then err="$2@$3 has no config.json"
    elif ! compgen -G "$dir/*.safetensors" >/dev/null; then
      err="$2@$3 has no safetensors weights"; fi
  fi
  rm -f "$errs"
  t=$(($(us) - t0))
  if [ -n "$err" ]; then
    emit "stage $1 FAILED after $(secs "$t") s: $err" "\"phase\":\"stage\",\"artifact\":\"$1\",\
\"source\":\"hub\",\"repo\":$(jstr "$2"),\"revision\":$(jstr "$3"),\"bytes\":0,\
\"fetched_bytes\":0,\"seconds\":$(secs "$t"),\"status\":\"failed\",\"error\":$(jstr "$err")"
    return 1
  fi
  read -r size fetched < <(sizes "$dir" "$t0")
  emit "stage $1 $2@$3: $size bytes ($fetched fetched) in $(secs "$t") s" \
    "\"phase\":\"stage\",\"artifact\":\"$1\",\"source\":\"hub\",\"repo\":$(jstr "$2"),\
\"revision\":$(jstr "$3"),\"commit\":$(jstr "${dir##*/}"),\"bytes\":$size,\
\"fetched_bytes\":$fetched,\"seconds\":$(secs "$t"),\"bytes_per_s\":$(rate "$size" "$t"),\
\"status\":\"ok\""
}
'''

SCRIPT_FUNCTIONS = r'''
check_local() {  # role path: a local checkpoint needs no download, only a config
  local t0 size fetched t
  t0=$(us)
  if [ ! -f "$2/config.json" ]; then
    t=$(($(us) - t0))
    emit "stage $1 FAILED: local checkpoint $2 has no config.json" "\"phase\":\"stage\",\
\"artifact\":\"$1\",\"source\":\"local\",\"path\":$(jstr "$2"),\"bytes\":0,\
\"fetched_bytes\":0,\"seconds\":$(secs "$t"),\"status\":\"failed\",\
\"error\":$(jstr "local checkpoint $2 has no config.json")"
    return 1
  fi
  read -r size fetched < <(sizes "$2" "$t0")
  t=$(($(us) - t0))
  emit "stage $1 $2: local, $size bytes" "\"phase\":\"stage\",\"artifact\":\"$1\",\
\"source\":\"local\",\"path\":$(jstr "$2"),\"bytes\":$size,\"fetched_bytes\":0,\
\"seconds\":$(secs "$t"),\"status\":\"ok\""
}
SECONDS_OF=()  # phase seconds (microseconds) as "phase=us", for the total line
phase() {  # name t0 [error]: log a phase; with an error, log the total and exit
  local t=$(($(us) - $2))
  SECONDS_OF+=("$1=$t")
  if [ -n "${3:-}" ]; then
    emit "$1 FAILED after $(secs "$t") s: $3" "\"phase\":\"$1\",\"seconds\":$(secs "$t"),\
\"status\":\"failed\",\"error\":$(jstr "$3")"
    total failed "$1"
  fi
  emit "$1: $(secs "$t") s" "\"phase\":\"$1\",\"seconds\":$(secs "$t"),\"status\":\"ok\""
}
total() {  # status [failed phase]: the last line, then exit with the phase's status
  local t=$(($(us) - START_US)) top="" top_t=-1 entry fits=false code=0
  for entry in "${SECONDS_OF[@]}"; do
    if [ "${entry#*=}" -gt "$top_t" ]; then top=${entry%%=*}; top_t=${entry#*=}; fi
  done
  [ "$1" = ok ] && [ "$t" -le "$((BUDGET_S * 1000000))" ] && fits=true
  if [ "$1" = ok ]; then
    emit "total $(secs "$t") s (budget $BUDGET_S s, $([ "$fits" = true ] && echo within || \
echo OVER)); longest phase: $top" "\"phase\":\"total\",\"seconds\":$(secs "$t"),\
\"budget_s\":$BUDGET_S,\"fits\":$fits,\"dominant\":\"$top\",\"status\":\"ok\""
    return 0
  fi
  case "$2" in
    staging) code=__STAGING__ ;; engine_start) code=__ENGINE__ ;; *) code=__WARMUP__ ;;
  esac
  emit "total: FAILED in $2 after $(secs "$t") s (exit $code)" "\"phase\":\"total\",\
\"seconds\":$(secs "$t"),\"budget_s\":$BUDGET_S,\"fits\":false,\"dominant\":\"$top\",\
\"status\":\"failed\",\"failed_phase\":\"$2\""
  exit "$code"
}
warmup() {  # the warmup completion, within WARMUP_TIMEOUT; prints its completion tokens
  python3 - "$PORT" "$WARMUP_PROMPT" "$WARMUP_TOKENS" "$WARMUP_TIMEOUT" <<'PY'
import json, signal, sys, urllib.request as u
port, prompt, n, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def late(*_):
    sys.exit(f"no completion within {limit:g} s")
signal.signal(signal.SIGALRM, late)
signal.setitimer(signal.ITIMER_REAL, limit)
# no "model": both engines then serve the one model they loaded
body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0}).encode()
req = u.Request("http://127.0.0.1:" + port + "/v1/completions", body,
                {"Content-Type": "application/json"})
try:
    out = json.load(u.urlopen(req, timeout=limit))
except Exception as exc:
    said = exc.read().decode(errors="replace")[:200] if hasattr(exc, "read") else ""
    sys.exit(f"the warmup request failed: {exc} {said}".strip())
if not out.get("choices"):
    sys.exit("the warmup request returned no completion")
print((out.get("usage") or {}).get("completion_tokens", 0))
PY
}
'''


def log_functions() -> str:
    """The deployment log's functions (emit, jstr, us, secs), as the scripts include them."""
    return _codes(LOG_FUNCTIONS.strip("\n"))


def _functions() -> str:
    return (_codes(LOG_FUNCTIONS.strip("\n")) + "\n" + _codes(SCRIPT_FUNCTIONS.strip("\n"))
            + "\n" + GATE_FUNCTIONS.strip("\n"))


def stage_script(pair: ResolvedPair, s: StagingPlan) -> str:
    """`stage-and-launch.sh` of the pair in the staging plan's mode."""
    calls = _stage_calls(pair, s)
    # the hub cache is what the engine must load when the script staged into it
    hub = any(c.startswith("stage ") for c in calls) and s.mode != "engine-prefetch"
    lines = [*_script_header(pair, s), _functions(),
             "START_US=$(us)",
             'emit "start $PAIR ($ENGINE, $MODE, budget $BUDGET_S s)" "\\"phase\\":\\"start\\",'
             '\\"started_unix\\":$(secs "$START_US"),\\"host\\":$(jstr "${HOSTNAME:-}"),'
             '\\"engine\\":$(jstr "$ENGINE"),\\"mode\\":$(jstr "$MODE"),'
             '\\"budget_s\\":$BUDGET_S"',
             *_staging_lines(calls, s.mode, hub),
             *_launch_lines(slug(pair.engine), hub)]
    return "\n".join(lines) + "\n"


def _script_header(pair: ResolvedPair, s: StagingPlan) -> list[str]:
    """The shebang, the comment that says what the script does and how it exits, the
    runbook's values as shell variables, and the argument check."""
    rb = pair.runbook
    codes = ", ".join(f"{code} {phase}" for phase, code in EXIT_STATUS.items())
    return ["#!/usr/bin/env bash",
            f"# {cell_text(rb.pair.title)}: stage both pinned artifacts, verify, launch, "
            "wait for /health, warm up.",
            f"# Generated by specpair from {pair.source_file}; do not edit.",
            *(f"# {cell_text(m)}" for m in marks(pair)),
            "# Deployment log on stdout: a human line, then a JSON line, per phase (--json:",
            "# JSON lines only); `specpair staging ingest` reads it. The engine's output goes",
            "# to $LOG (a fallback's baseline launch appends, after a line saying so). Exit",
            f"# status when a phase fails: {codes}; {EXIT_CANARY} canary "
            "(canary.on_failure: fail);",
            "# 2 usage. No traffic before the canary passes: $STATE_DIR/ready is written then",
            "# (\"speculative\"), or once the baseline launch took over (\"fallback\").",
            "set -euo pipefail",
            'HERE=$(cd "$(dirname "$0")" && pwd)',
            f"LOG_FORMAT={LOG_FORMAT}",
            f"PAIR={shlex.quote(pair.name)}",
            f"ENGINE={shlex.quote(pair.engine)}",
            f"MODE={shlex.quote(s.mode)}",
            f"PORT={pair.release.profile.port(rb.deployment.port)}",
            "HEALTH=/health",
            f"HEALTH_TIMEOUT={int(rb.staging.cold_start_budget_s)}",
            f"WARMUP_PROMPT={shlex.quote(rb.staging.warmup.prompt)}",
            f"WARMUP_TOKENS={rb.staging.warmup.max_tokens}",
            f"WARMUP_TIMEOUT={rb.staging.warmup.timeout_s:g}",
            f"BUDGET_S={int(rb.staging.cold_start_budget_s)}",
            'LOG="${LOG:-server.log}"',
            f"ON_FAILURE={rb.canary.on_failure}",
            'CANARY_DIR="$HERE"',
            'STATE_DIR="${STATE_DIR:-specpair-state}"',
            f"CANARY_PORT={rb.canary.metrics_port}",
            f"CANARY_HOST={shlex.quote(rb.deployment.host)}",
            "KEEP_FAILED=0  # a failed canary ends the script: nothing is left serving",
            "JSON_ONLY=0",
            'case "${1:-}" in',
            "  --json) JSON_ONLY=1 ;;",
            '  "") ;;',
            '  *) echo "usage: $0 [--json]" >&2; exit 2 ;;',
            "esac"]


def _stage_calls(pair: ResolvedPair, s: StagingPlan) -> list[str]:
    """One shell call per artifact in the staging order: `stage` for a hub artifact,
    `check_local` for a local checkpoint."""
    rb = pair.runbook
    arts = {"target": rb.target, "draft": rb.draft}
    calls = []
    for role in s.order:
        art = arts[role]
        if art is None:
            continue
        if art.repo is not None:
            calls.append(f"stage {role} {shlex.quote(art.repo)} "
                         f"{shlex.quote(art.revision or 'main')}")
        elif art.path is not None:
            calls.append(f"check_local {role} {shlex.quote(art.path)}")
    return calls


def _staging_lines(calls: list[str], mode: str, hub: bool) -> list[str]:
    """The staging phase in the planned mode: both artifacts at once, in turn, or only
    the local checks where the engine fetches from the hub itself."""
    lines = ["t0=$(us)"]
    if hub:
        lines.append('command -v hf >/dev/null || phase staging "$t0" '
                     '"the hf command (huggingface_hub) is not installed"')
    if mode == "parallel-prestage" and len(calls) > 1:
        lines.append("# both artifacts at once; any failure stops the script")
        lines.append("pids=()")
        lines += [f"{call} & pids+=($!)" for call in calls]
        lines.append("failed=0")
        lines.append('for pid in "${pids[@]}"; do wait "$pid" || failed=1; done')
        lines.append('[ "$failed" = 0 ] || phase staging "$t0" "an artifact failed to stage"')
    elif mode == "engine-prefetch":
        lines.append("# engine-prefetch: the engine streams shards itself; only local paths "
                     "are checked")
        lines += [f'{c} || phase staging "$t0" "an artifact failed to stage"'
                  for c in calls if c.startswith("check_local")]
    else:
        lines += [f'{c} || phase staging "$t0" "an artifact failed to stage"' for c in calls]
    lines.append('phase staging "$t0"')
    return lines


def _launch_lines(engine: str, hub: bool) -> list[str]:
    """Launch the engine (offline when the script staged into the hub cache), wait for
    /health within the cold-start budget, warm up, and log the total."""
    offline = "HF_HUB_OFFLINE=1 " if hub else ""
    return [
        "t0=$(us)",
        # the mark on a line of its own: the pair's last output may lack its newline
        f"start_baseline() {{ printf '\\n%s\\n' {shlex.quote(BASELINE_MARK)} >>\"$LOG\"; "
        f'{offline}bash "$HERE/launch-{engine}-baseline.sh" >>"$LOG" 2>&1 & server=$!; }}',
        # appending, from a fresh file: the pair's leftover processes still write while a
        # fallback's baseline starts, and writes at a stale offset would overwrite its mark
        ': >"$LOG"',
        f'{offline}bash "$HERE/launch-{engine}.sh" >>"$LOG" 2>&1 &',
        "server=$!",
        "trap 'kill \"$server\" $CANARY_METRICS 2>/dev/null || true' EXIT",
        "until healthy; do",
        '  if ! kill -0 "$server" 2>/dev/null; then',
        '    code=0; wait "$server" || code=$?',
        '    phase engine_start "$t0" "the engine exited with status $code before $HEALTH '
        'answered; see $LOG"',
        "  fi",
        '  if [ "$(($(us) - t0))" -gt "$((HEALTH_TIMEOUT * 1000000))" ]; then',
        '    phase engine_start "$t0" "no answer on $HEALTH within $HEALTH_TIMEOUT s; see $LOG"',
        "  fi",
        "  sleep 1",
        "done",
        'phase engine_start "$t0"',
        "t0=$(us)",
        'if ! out=$(warmup 2>&1); then phase warmup "$t0" "${out##*$\'\\n\'}"; fi',
        'phase warmup "$t0"',
        "total ok",
        f"canary_gate || exit {EXIT_CANARY}",
        "trap - EXIT",
        'code=0; wait "$server" || code=$?',
        'kill $CANARY_METRICS 2>/dev/null || true',
        'exit "$code"']


# The Kubernetes init container: the same stage function, then the staging line, and
# the start time for the server's warmup hook (on the shared model volume).
INIT_MAIN = r'''
START_US=$(us)
emit "start $PAIR ($ENGINE, $MODE, budget $BUDGET_S s)" "\"phase\":\"start\",\
\"started_unix\":$(secs "$START_US"),\"host\":$(jstr "${HOSTNAME:-}"),\
\"engine\":$(jstr "$ENGINE"),\"mode\":$(jstr "$MODE"),\"budget_s\":$BUDGET_S"
t0=$(us); failed=0; pids=()
for spec in "$@"; do
  role=${spec%%=*}; ref=${spec#*=}
  if [ "$MODE" = serial ]; then
    stage "$role" "${ref%@*}" "${ref##*@}" || { failed=1; break; }
  else
    stage "$role" "${ref%@*}" "${ref##*@}" & pids+=($!)
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
t=$(($(us) - t0))
if [ "$failed" = 1 ]; then
  emit "staging FAILED after $(secs "$t") s" "\"phase\":\"staging\",\"seconds\":$(secs "$t"),\
\"status\":\"failed\",\"error\":\"an artifact failed to stage\""
  emit "total: FAILED in staging after $(secs "$(($(us) - START_US))") s" "\"phase\":\"total\",\
\"seconds\":$(secs "$(($(us) - START_US))"),\"budget_s\":$BUDGET_S,\"fits\":false,\
\"dominant\":\"staging\",\"status\":\"failed\",\"failed_phase\":\"staging\""
  exit __STAGING__
fi
emit "staging: $(secs "$t") s" "\"phase\":\"staging\",\"seconds\":$(secs "$t"),\"status\":\"ok\""
printf '%s %s\n' "$START_US" "$t" >"$HF_HOME/.specpair-staging"
'''

# The server container's postStart hook: waits for /health, sends the warmup request and
# logs engine_start, warmup and the total (from the init container's start) into the
# container's own log (`kubectl logs`). A failure fails the hook, so the container
# restarts, and the log names the phase.
HOOK_PY = r'''
import json, os, signal, sys, time, urllib.request as u
pair, engine, port, prompt, n, warm_s, budget = sys.argv[1:8]
warm_s, budget, hook = float(warm_s), float(budget), time.time()
try:
    with open(os.environ.get("HF_HOME", "/models") + "/.specpair-staging") as f:
        start_us, staging_us = (int(x) for x in f.read().split())
except (OSError, ValueError):  # no init container ran: time from here
    start_us, staging_us = int(hook * 1e6), 0
start, took = start_us / 1e6, {"staging": staging_us / 1e6}
def emit(human, **fields):
    line = {"log": "__FORMAT__", "pair": pair, "t": round(time.time() - start, 3), **fields}
    print("stage-and-launch: " + human + "\n" + json.dumps(line, separators=(",", ":")),
          flush=True)
def total(failed=None):
    seconds = round(time.time() - start, 3)
    top = max(took, key=took.get)
    fits = failed is None and seconds <= budget
    emit(f"total {seconds} s" + (f": FAILED in {failed}" if failed else ""), phase="total",
         seconds=seconds, budget_s=budget, fits=fits, dominant=top,
         status="failed" if failed else "ok", **({"failed_phase": failed} if failed else {}))
def fail(phase, t0, error, code):
    took[phase] = round(time.time() - t0, 3)
    emit(f"{phase} FAILED after {took[phase]} s: {error}", phase=phase, seconds=took[phase],
         status="failed", error=error)
    total(phase)
    sys.exit(code)
base = "http://127.0.0.1:" + port
while True:
    try:
        if u.urlopen(base + "/health", timeout=5).status == 200:
            break
    except Exception:
        pass
    if time.time() - hook > budget:
        fail("engine_start", hook, f"no answer on /health within {budget:g} s", __ENGINE__)
    time.sleep(1)
took["engine_start"] = round(time.time() - hook, 3)
emit(f"engine_start: {took['engine_start']} s", phase="engine_start",
     seconds=took["engine_start"], status="ok")
t0 = time.time()
def late(*_):
    fail("warmup", t0, f"no completion within {warm_s:g} s", __WARMUP__)
signal.signal(signal.SIGALRM, late)
signal.setitimer(signal.ITIMER_REAL, warm_s)
body = json.dumps({"prompt": prompt, "max_tokens": int(n), "temperature": 0}).encode()
try:
    out = json.load(u.urlopen(u.Request(base + "/v1/completions", body,
                                        {"Content-Type": "application/json"}), timeout=warm_s))
    ok = bool(out.get("choices"))
except Exception as exc:
    fail("warmup", t0, f"the warmup request failed: {exc}", __WARMUP__)
signal.setitimer(signal.ITIMER_REAL, 0)
if not ok:
    fail("warmup", t0, "the warmup request returned no completion", __WARMUP__)
took["warmup"] = round(time.time() - t0, 3)
emit(f"warmup: {took['warmup']} s", phase="warmup", seconds=took["warmup"], status="ok")
total()
'''


def _codes(text: str) -> str:
    return (text.replace("__STAGING__", str(EXIT_STATUS["staging"]))
            .replace("__ENGINE__", str(EXIT_STATUS["engine_start"]))
            .replace("__WARMUP__", str(EXIT_STATUS["warmup"]))
            .replace("__FORMAT__", LOG_FORMAT)
            .replace("__WORKERS__", str(HF_DOWNLOAD_WORKERS)))  # what the cold start models


def init_container_command(pair: ResolvedPair, mode: str) -> list[str]:
    """`bash -c SCRIPT stage PAIR ENGINE MODE BUDGET role=repo@revision…` (exec form:
    runbook values are arguments, never script text)."""
    rb = pair.runbook
    script = ('PAIR=$1 ENGINE=$2 MODE=$3 BUDGET_S=$4; shift 4\n'
              f'LOG_FORMAT={LOG_FORMAT}; JSON_ONLY=0\n'
              + _codes(LOG_FUNCTIONS.strip("\n")) + "\n" + _codes(INIT_MAIN.strip("\n")))
    command = ["bash", "-euo", "pipefail", "-c", script, "stage", pair.name, pair.engine, mode,
               str(int(rb.staging.cold_start_budget_s))]
    for role in rb.staging.order:
        art = rb.target if role == "target" else rb.draft
        if art is not None and art.repo is not None:
            command.append(f"{role}={art.repo}@{art.revision or 'main'}")
    return command


def warmup_hook_command(pair: ResolvedPair, port: int) -> list[str]:
    """The postStart hook; its output goes to the container's log (PID 1's stdout)."""
    rb = pair.runbook
    warm = rb.staging.warmup
    return ["sh", "-c", 'exec python3 -c "$0" "$@" >/proc/1/fd/1 2>&1',
            _codes(HOOK_PY.strip("\n")) + "\n", pair.name, pair.engine, str(port), warm.prompt,
            str(warm.max_tokens), f"{warm.timeout_s:g}",
            str(int(rb.staging.cold_start_budget_s))]
