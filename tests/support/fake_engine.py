"""A stand-in OpenAI-compatible engine for bench tests where no real engine is needed:
it replays recorded vLLM/SGLang streams and keeps Prometheus counters that move with
each request, like the engines' own. The real-engine run is tests/engine/test_bench.py."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support import paths

FIXTURES = paths.FIXTURES / "engine"



class EngineHTTPServer(ThreadingHTTPServer):
    # the engines' servers listen with uvicorn's backlog of 2048; socketserver's 5 resets
    # concurrent connections on a loaded machine
    request_queue_size = 2048

class FakeEngine:
    def __init__(self, *, speculative: bool, engine: str = "vllm", positions: int = 3,
                 accepted_per_request: int = 11, drafts_per_request: int = 6) -> None:
        self.speculative = speculative
        self.engine = engine
        self.positions = positions
        self.counts = {"drafts": 0, "accepted": 0, "draft_tokens": 0, "verify": 0, "gen": 0}
        self.per_request = (accepted_per_request, drafts_per_request)
        self.bodies: list[dict[str, object]] = []
        self.lock = threading.Lock()
        name = "sglang-0.5.23-stream.txt" if engine == "sglang" else \
            "vllm-0.32.0-cpu-ngram-stream.txt"
        stream = (FIXTURES / name).read_text()
        if not speculative:  # a baseline answers without speculative fields
            stream = re.sub(r',"(metrics|sglext)":\{.*\}\}\}', "}", stream)
        self.stream = stream.encode()
        self.httpd = EngineHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def metrics(self) -> str:
        c = self.counts
        lines = ['vllm:num_requests_running{engine="0",model_name="m"} 0.0']
        if self.speculative and self.engine == "vllm":
            lines += [f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} '
                      f'{c["drafts"]}',
                      f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} '
                      f'{c["draft_tokens"]}',
                      f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} '
                      f'{c["accepted"]}']
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",'
                      f'model_name="m",position="{i}"}} 0' for i in range(self.positions)]
        if self.speculative and self.engine == "sglang":
            lines += [f"sglang:spec_verify_calls_total {c['verify']}",
                      f"sglang:generation_tokens_total {c['gen']}", "sglang:spec_accept_length 4"]
        return "\n".join(lines) + "\n"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def send(self, body: bytes, kind: str = "application/json") -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self.send(fake.metrics().encode(), "text/plain")
                elif self.path == "/v1/models":
                    self.send(json.dumps({"data": [{"id": "m"}]}).encode())
                elif self.path == "/server_info":
                    self.send(json.dumps({"speculative_algorithm": "DSPARK",
                                          "speculative_num_draft_tokens": 8}).encode())
                else:
                    self.send(b"{}")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.bodies.append(body)
                    if fake.speculative:
                        accepted, drafts = fake.per_request
                        fake.counts["drafts"] += drafts
                        fake.counts["accepted"] += accepted
                        fake.counts["draft_tokens"] += drafts * fake.positions
                        fake.counts["verify"] += 3
                        fake.counts["gen"] += 12
                self.send(fake.stream, "text/event-stream")

        return Handler
