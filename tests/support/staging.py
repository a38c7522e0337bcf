"""A stand-in engine and a run of the generated staging script against the local hub."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.support.checkpoints import llama_config
from tests.support.hubserver import HubServer, Repo

FAKE_ENGINE = textwrap.dedent("""\
    #!/usr/bin/env python3
    # A stand-in engine on --port. FAKE_MODE: ok | unhealthy (503 forever) | exit (dies
    # at once) | stall (healthy, but the completion never comes).
    import json, os, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    mode = os.environ.get("FAKE_MODE", "ok")
    if mode == "exit":
        sys.exit("fake engine: refusing to start")
    port = int(sys.argv[sys.argv.index("--port") + 1])
    open(os.environ["ENGINE_ENV"], "w").write(json.dumps(dict(os.environ)))
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status); self.send_header("Content-Length", str(len(data)))
            self.end_headers(); self.wfile.write(data)
        def do_GET(self):
            self.reply(503 if mode == "unhealthy" else 200, {})
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            open(os.environ["ENGINE_ENV"] + ".warmup", "w").write(json.dumps(body))
            if mode == "stall":
                time.sleep(600)
            self.reply(200, {"choices": [{"text": "hi"}], "usage": {"completion_tokens": 3}})
    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
""")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def weights(n: int) -> bytes:
    """A real safetensors file of n float16 values."""
    import numpy as np
    from safetensors.numpy import save

    return save({"w": np.arange(n, dtype=np.float16)})


def publish(hub: HubServer, repo: str, n: int) -> tuple[str, int]:
    files = {"config.json": json.dumps(llama_config()).encode(),
             "model.safetensors": weights(n)}
    hub.repos[repo] = Repo()
    return hub.repos[repo].commit(files), sum(len(v) for v in files.values())


def run(script: Path, hub: HubServer, *args: str, fake: str = "ok",
        timeout: float = 120, work: Path | None = None) -> tuple[int | None, str]:
    """Run until the total line (then stop the serving script) or its exit; the hub
    cache, the engine's log and the stand-in engine live in `work`."""
    folder = work or script.parent
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(folder / "hf"),
           "HF_HUB_DISABLE_TELEMETRY": "1", "FAKE_MODE": fake,
           "ENGINE_ENV": str(folder / "engine-env.json"), "LOG": str(folder / "server.log"),
           # the real hf command, installed beside this interpreter; the stand-in engine
           "PATH": f"{folder / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("HF_HUB_OFFLINE", None)
    # in `folder`: the gate's state (STATE_DIR, relative) must not land in the repo
    process = subprocess.Popen(["bash", str(script), *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=env, text=True, cwd=folder,
                               start_new_session=True)
    assert process.stdout is not None
    out: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        for line in process.stdout:
            out.append(line)
            if '"phase":"total"' in line:
                break
            assert time.monotonic() < deadline, "".join(out)
        try:
            code: int | None = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None  # still serving, as it should after a good start
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    return code, "".join(out)
