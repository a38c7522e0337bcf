"""A stand-in for an engine's answers in the canary's error-path tests: a local HTTP server
on 127.0.0.1 that keeps speculative counters as vLLM exports them and answers completions
(good, bad, oversized, slow, without speculation). Never a substitute for the real-engine
tests (tests/engine/test_canary.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.fake_engine import EngineHTTPServer


@dataclass
class Behaviour:
    """What the stand-in does: per request it adds `steps` verify steps and `accepted`
    accepted tokens (split over `positions` per-position counters), or exports no
    speculative counter at all."""

    speculative: bool = True
    steps: int = 10
    accepted: int = 20
    positions: int = 3
    answer: bytes = b""
    unspeculated: bytes = b""
    """The answer to a request that asks for no speculation (`no_spec`), where it differs."""
    status: int = 200
    drip_s: float = 0.0
    metrics_padding: int = 0
    counts: dict[str, float] = field(default_factory=lambda: {"steps": 0, "accepted": 0,
                                                              "generated": 0})
    per_position: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    bodies: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def metrics(self) -> str:
        c = self.counts
        lines = [f"vllm:generation_tokens_total{{engine=\"0\"}} {c['generated']}"]
        if self.speculative:
            lines += [f"vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {c['steps']}",
                      f"vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} "
                      f"{c['accepted']}",
                      "vllm:spec_decode_num_drafts_created{engine=\"0\"} 1.7e9"]
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",'
                      f'position="{k}"}} {v}' for k, v in enumerate(self.per_position)]
        return "\n".join(lines) + "\n" + "#" * self.metrics_padding

    def answered(self, body: dict[str, Any]) -> bytes:
        with self.lock:
            self.bodies.append(body)
            if self.speculative:
                self.counts["steps"] += self.steps
                self.counts["accepted"] += self.accepted
                # accepted tokens spread as a chain drafter's: position k counts the drafts
                # whose first k+1 tokens were accepted
                left = self.accepted
                for k in range(self.positions):
                    take = min(left, self.steps)
                    self.per_position[k] += take
                    left -= take
            self.counts["generated"] += body.get("max_tokens", 1)
        if body.get("no_spec") and self.unspeculated:
            return self.unspeculated
        return self.answer or json.dumps({"choices": [{"text": "ok " * 3}]}).encode()


@contextmanager
def standin(behaviour: Behaviour) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def reply(self, body: bytes, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if not behaviour.drip_s:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if behaviour.drip_s:  # a byte at a time, never done before the deadline
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(behaviour.drip_s)
            else:
                self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self.reply(b'{"data": [{"id": "tiny"}]}')
            elif self.path == "/metrics":
                self.reply(behaviour.metrics().encode())
            else:
                self.reply(b"{}", 404)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.reply(behaviour.answered(body), behaviour.status)

    httpd = EngineHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
