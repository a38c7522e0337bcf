"""A local HTTP server on 127.0.0.1 that answers each GET as the test says: a body, the
same body a byte at a time, or a body that never ends. What a broken or hostile server
(Prometheus, a proxy, the hub) sends, for the bounded clients to meet for real."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    body: bytes = b""
    status: int = 200
    drip_s: float = 0.0      # the body a byte at a time, this long apart
    endless: bool = False    # a body that never ends (it claims a huge length)
    headers: dict[str, str] = field(default_factory=dict)


def send(handler: BaseHTTPRequestHandler, answer: Answer) -> None:
    """Write `answer` on `handler`'s connection; a client that hangs up ends it."""
    handler.send_response(answer.status)
    handler.send_header("Content-Type", "application/json")
    for key, value in answer.headers.items():
        handler.send_header(key, value)
    handler.send_header("Content-Length",
                        str(1 << 40 if answer.endless else len(answer.body)))
    handler.end_headers()
    try:
        if answer.endless:
            for _ in range(1 << 16):  # 4 GiB at most, if nobody hangs up
                handler.wfile.write(b"[" * 65536)
        elif answer.drip_s:
            for i in range(len(answer.body)):
                handler.wfile.write(answer.body[i:i + 1])
                handler.wfile.flush()
                time.sleep(answer.drip_s)
        else:
            handler.wfile.write(answer.body)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client hung up: what a bounded client does


@contextmanager
def serving(answer_for: Callable[[str], Answer]) -> Iterator[str]:
    """A server answering each GET with `answer_for(path)`; yields its base URL."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            send(self, answer_for(self.path))

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
