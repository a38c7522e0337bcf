"""The bounded transport holds through a proxy the environment names (issue 52, item 6).

httpx and httpx2 mount one transport per proxy in HTTP_PROXY/HTTPS_PROXY/ALL_PROXY beside
the one a client is given; an answer through such a proxy was read unbounded. Here a real
HTTP server on 127.0.0.1 plays the proxy and answers every request with an endless body:
the client must give up at its size limit, for both HTTP clients specpair uses."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType

import httpx
import httpx2
import pytest

from specpair.load.bounded_http import AnswerRefused, Limits, client, redact

SEEN: list[str] = []


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # a forward proxy sees the absolute URL
            SEEN.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 40))
            self.end_headers()
            try:
                for _ in range(1 << 14):
                    self.wfile.write(b"x" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("http", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_an_answer_through_the_environments_proxy_is_bounded(
        http: ModuleType, proxy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    SEEN.clear()
    with client(http, Limits(deadline_s=10.0, max_bytes=1 << 20)) as bounded, \
            pytest.raises(AnswerRefused, match="1,048,576"):
        bounded.get("http://hub.example.invalid/api/models/org/m").read()
    assert SEEN == ["http://hub.example.invalid/api/models/org/m"]  # it went by the proxy


def test_credentials_never_reach_a_message() -> None:
    assert redact("http://admin:s3cret@prom.example:9090/x") == "http://***@prom.example:9090/x"
    assert redact("https://prom.example/x") == "https://prom.example/x"
