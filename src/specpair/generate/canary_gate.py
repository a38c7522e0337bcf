"""The canary gate of a deployment: no traffic before the canary passes (issue 53 item 2).

One bash function, `canary_gate`, in both places a pair starts: `stage-and-launch.sh`
(after the warmup) and the Kubernetes server container, whose command is a small wrapper
(`server_command`) that starts the engine, waits for its health endpoint and runs the
same function (not a postStart hook: a long hook holds the container's start and its
probes). The function runs generated/canary.py on generated/canary.json against the new
server, then, by the runbook's `canary.on_failure`:

- passed: writes `$STATE_DIR/ready` ("speculative"), which the readiness probe requires;
- fallback: stops the engine, starts the generated baseline launch (the target alone,
  lossless), and once it is healthy writes `ready` ("fallback");
- fail: writes nothing: the server never becomes ready (the script stops it and exits 6;
  the pod keeps it, unready, for its metrics and log, and serves the verdict).

Either way it serves the verdict on `canary.metrics_port` (specpair_canary_state, which
launch serves; specpair_canary_reason, check, class and depth), which the PodMonitor
scrapes and the canary alerts read, and logs a `canary` line (and a `serving` line on
fallback) in the deployment-log format.
"""

from __future__ import annotations

import shlex
from typing import Any

from specpair.analyse.launch import Launch
from specpair.generate.shell_text import k8s_literal
from specpair.load.staging_log import BASELINE_MARK, LOG_FORMAT
from specpair.resolve.pair import ResolvedPair

EXIT_CANARY = 6
"""stage-and-launch.sh's exit status when the canary fails and the runbook says fail."""
STATE_DIR = "/specpair/state"
CANARY_DIR = "/specpair/canary"

GATE_FUNCTIONS = r'''
healthy() {  # one GET of $HEALTH over bash's /dev/tcp: true when it answers 200
  local line=""
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$HEALTH" >&3 2>/dev/null || true
  IFS= read -r -t 5 line <&3 || true
  exec 3<&-
  [[ $line == HTTP/1.?" 200"* ]]
}
canary_reason() {  # the report's first reason (else the canary's last error line)
  python3 - "$STATE_DIR/canary-report.json" "$STATE_DIR/canary.err" <<'PY'
import json, sys
try:
    with open(sys.argv[1]) as f:
        first = (json.load(f).get("reasons") or [{}])[0]
    print("%s: class %s depth %s: %s" % (first.get("check"), first.get("class"),
                                         first.get("depth"), first.get("message")))
except (OSError, ValueError, AttributeError):
    with open(sys.argv[2], errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    print(lines[-1][:300] if lines else "the canary wrote no report")
PY
}
CANARY_METRICS=""
canary_gate() {  # the canary on the healthy server, then serve as the runbook chooses
  local t0 t code=0 state=speculative reason=""
  t0=$(us)
  mkdir -p "$STATE_DIR"
  rm -f "$STATE_DIR/ready"
  python3 "$CANARY_DIR/canary.py" --url "http://127.0.0.1:$PORT" <"$CANARY_DIR/canary.json" \
    >"$STATE_DIR/canary-report.json" 2>"$STATE_DIR/canary.err" || code=$?
  t=$(($(us) - t0))
  if [ "$code" = 0 ]; then
    printf '%s\n' "$state" >"$STATE_DIR/ready"  # ready before the line that says so
    emit "canary: passed in $(secs "$t") s; serving with speculation" "\"phase\":\"canary\",\
\"seconds\":$(secs "$t"),\"status\":\"ok\",\"serving\":\"speculative\""
  else
    reason=$(canary_reason)
    if [ "$ON_FAILURE" = fallback ]; then state=fallback; else state=failed; fi
    emit "canary FAILED after $(secs "$t") s (exit $code): $reason; on_failure: $ON_FAILURE" \
      "\"phase\":\"canary\",\"seconds\":$(secs "$t"),\"status\":\"failed\",\"exit\":$code,\
\"error\":$(jstr "$reason"),\"on_failure\":$(jstr "$ON_FAILURE")"
  fi
  if [ "$state" != failed ] || [ "$KEEP_FAILED" = 1 ]; then  # the verdict, for Prometheus
    python3 "$CANARY_DIR/canary.py" --serve "$CANARY_PORT" --host "$CANARY_HOST" \
      --state "$state" <"$STATE_DIR/canary-report.json" >/dev/null 2>&1 &
    CANARY_METRICS=$!
  fi
  [ "$state" = failed ] && return 1
  if [ "$state" = fallback ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    t0=$(us)
    start_baseline
    until healthy; do
      if ! kill -0 "$server" 2>/dev/null || \
          [ "$(($(us) - t0))" -gt "$((HEALTH_TIMEOUT * 1000000))" ]; then
        emit "fallback FAILED: the baseline launch did not answer on $HEALTH" \
          "\"phase\":\"serving\",\"serving\":\"fallback\",\"status\":\"failed\",\
\"error\":\"the baseline launch did not answer on $HEALTH\""
        return 1
      fi
      sleep 1
    done
    t=$(($(us) - t0))
    printf '%s\n' "$state" >"$STATE_DIR/ready"
    emit "serving: fallback, the target alone (the baseline launch), after \
$(secs "$t") s: $reason" "\"phase\":\"serving\",\"serving\":\"fallback\",\
\"status\":\"ok\",\"seconds\":$(secs "$t"),\"reason\":$(jstr "$reason")"
  fi
}
'''

# The Kubernetes server container: the engine as a child of this shell (PID 1, which
# passes SIGTERM on), the gate once /health answers, then the engine's own exit status.
SERVER_MAIN = r'''
START_US=$(us)
SPEC=("${@:1:$N}")
BASE=("${@:$((N + 1))}")
start_baseline() { printf '\n%s\n' "$BASELINE_MARK"; "${BASE[@]}" & server=$!; }
"${SPEC[@]}" & server=$!
trap 'kill -TERM "$server" $CANARY_METRICS 2>/dev/null; wait "$server"; exit 143' TERM INT
until healthy; do
  if ! kill -0 "$server" 2>/dev/null; then code=0; wait "$server" || code=$?; exit "$code"; fi
  sleep 2
done
canary_gate || true  # failed: never ready; the engine stays up for its metrics and log
code=0; wait "$server" || code=$?
exit "$code"
'''

# The readiness probe: the gate's marker and the engine's readiness endpoint.
READY_PROBE = ('test -f "$0/ready" || exit 1; exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1; '
               'printf "GET %s HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n" "$2" >&3; '
               'IFS= read -r -t 5 line <&3; [[ $line == HTTP/1.?" 200"* ]]')


def server_command(pair: ResolvedPair, launch: Launch, spec: list[str],
                   baseline: list[str] | None, log_functions: str) -> list[str]:
    """`bash -c GATE specpair-serve PAIR PORT HEALTH ON_FAILURE CANARY_PORT TIMEOUT N
    <the engine's argv (N words)> <the baseline's argv>` (words as the manifest writes
    them): exec form, so every runbook value stays an argument. Without a baseline (a
    multi-node group, whose other nodes a baseline on the leader cannot replace) a failure
    is `fail`."""
    rb = pair.runbook
    on_failure = rb.canary.on_failure if baseline is not None else "fail"
    script = ("PAIR=$1 PORT=$2 HEALTH=$3 ON_FAILURE=$4 CANARY_PORT=$5 HEALTH_TIMEOUT=$6 N=$7; "
              "shift 7\n"
              f"LOG_FORMAT={LOG_FORMAT}; JSON_ONLY=0; CANARY_DIR=${{CANARY_DIR:-{CANARY_DIR}}}; "
              f"STATE_DIR=${{STATE_DIR:-{STATE_DIR}}}; CANARY_HOST=0.0.0.0; KEEP_FAILED=1\n"
              f"BASELINE_MARK={shlex.quote(BASELINE_MARK)}\n"
              + log_functions + "\n" + GATE_FUNCTIONS.strip("\n") + "\n"
              + SERVER_MAIN.strip("\n") + "\n")
    return ["bash", "-c", k8s_literal(script), "specpair-serve", k8s_literal(pair.name),
            str(launch.port), k8s_literal(launch.health_path), on_failure,
            str(rb.canary.metrics_port), str(int(rb.staging.cold_start_budget_s)),
            str(len(spec)), *spec, *(baseline or [])]


def readiness_probe(launch: Launch) -> dict[str, object]:
    return {"exec": {"command": ["bash", "-c", k8s_literal(READY_PROBE), STATE_DIR,
                                 str(launch.port), k8s_literal(launch.ready_path)]},
            "periodSeconds": 10, "timeoutSeconds": 5}


FILES_SCRIPT = ('mkdir -p "$0" && printf "%s" "$1" >"$0/canary.py" && '
                'printf "%s" "$2" >"$0/canary.json"')
"""The canary-files init container: canary.py and canary.json (exec-form arguments, as
generated beside the manifest) into the emptyDir the server reads them from."""


def gate(pair: ResolvedPair, launch: Launch, container: dict[str, Any], pod: dict[str, Any],
         image: str, files: dict[str, str], baseline: list[str] | None,
         log_functions: str) -> None:
    """Gate the server container on the canary: the wrapper command around the engine's
    (and the baseline's) argv, the readiness probe on the gate's marker, the canary's files
    (written by an init container) and state (emptyDirs), and the verdict's port."""
    container["command"] = server_command(pair, launch, container["command"], baseline,
                                          log_functions)
    container["ports"] = [*container["ports"], {
        "containerPort": pair.runbook.canary.metrics_port, "name": "canary"}]
    container["volumeMounts"] = [*container["volumeMounts"],
                                 {"name": "canary", "mountPath": CANARY_DIR, "readOnly": True},
                                 {"name": "canary-state", "mountPath": STATE_DIR}]
    container["readinessProbe"] = readiness_probe(launch)
    pod["initContainers"] = [*pod["initContainers"], {
        "name": "canary-files", "image": image,
        "command": ["sh", "-c", k8s_literal(FILES_SCRIPT), CANARY_DIR,
                    k8s_literal(files["canary.py"]), k8s_literal(files["canary.json"])],
        "volumeMounts": [{"name": "canary", "mountPath": CANARY_DIR}]}]
    pod["volumes"] = [*pod["volumes"], {"name": "canary", "emptyDir": {}},
                      {"name": "canary-state", "emptyDir": {}}]


def ungate(container: dict[str, Any]) -> None:
    """A copy of the server container without the gate's port and mounts (LWS workers)."""
    container["ports"] = [p for p in container["ports"] if p["name"] != "canary"]
    container["volumeMounts"] = [m for m in container["volumeMounts"]
                                 if not m["name"].startswith("canary")]


def rule_group(pair_name: str, window: str = "1m") -> dict[str, Any]:
    """The canary's alerts, one per reason the served verdict carries (check, class and
    depth as labels, named in the description): a failed canary (the pod stays unready)
    and a fallback (the target alone serves)."""
    s = f'{{specpair_pair="{pair_name}"}}'

    def alert(state: str, severity: str, summary: str, what: str) -> dict[str, Any]:
        return {"alert": f"SpecpairCanary{state.capitalize()}",
                "expr": f"(specpair_canary_reason{s} == 1) and on(specpair_pair, instance) "
                        f"(specpair_canary_state{{specpair_pair=\"{pair_name}\", "
                        f"state=\"{state}\"}} == 1)",
                "for": window, "labels": {"severity": severity},
                "annotations": {"summary": f"{pair_name}: {summary}", "description": (
                    "The canary before traffic failed: {{ $labels.check }}, class "
                    "{{ $labels.class }}, depth {{ $labels.depth }} " + what)}}

    return {"name": f"specpair-{pair_name}-canary", "rules": [
        alert("failed", "critical", "the canary failed; the pod takes no traffic",
              "(canary.on_failure: fail). The pod stays unready; the report is "
              "/specpair/state/canary-report.json in the server container."),
        alert("fallback", "warning", "serving the target alone after a failed canary",
              "(canary.on_failure: fallback). The baseline launch serves: no speculation, "
              "the target's capacity.")]}
