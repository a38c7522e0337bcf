"""The bounded transport holds through a proxy the environment names (issue 52, item 6).

httpx and httpx2 mount one transport per proxy in HTTP_PROXY/HTTPS_PROXY/ALL_PROXY beside
the one a client is given; an answer through such a proxy was read unbounded. Here a real
HTTP server on 127.0.0.1 plays the proxy and answers every request with an endless body:
the client must give up at its size limit, for both HTTP clients specpair uses."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import httpx
import httpx2
import pytest

from specpair.load.bounded_http import AnswerRefused, Limits, client, redact
from tests.support.answer_server import Answer, serving

SEEN: list[str] = []


def _endless(path: str) -> Answer:  # a forward proxy sees the absolute URL
    SEEN.append(path)
    return Answer(endless=True)


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with serving(_endless) as url:
        yield url


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
