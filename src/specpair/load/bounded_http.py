"""Answers from servers (the hub, Prometheus, engines) are input: bounded in time and size.

httpx's timeouts are per phase and per read, so a server that drip-feeds its answer a byte
at a time never times out, and a client that reads whole bodies holds whatever it is sent
(1.9 GB resident for a 600 MB answer). `bounded_transport` wraps a transport so that each
request has one deadline for the whole exchange and each answer a maximum size, checked
as the bytes arrive; both end in `AnswerRefused`, which every client turns into a located
error with a hint. One mechanism for httpx (Prometheus, the engines) and httpx2 (the
client huggingface_hub is built on): the two share their transport interface.

URLs are shown without their credentials (`redact`): a Prometheus URL may carry a
password, and errors are printed and logged.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any


class AnswerRefused(Exception):
    """An answer past its deadline or its size: `reason` says which, for the message."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    deadline_s: float
    """The whole exchange: connecting, the headers and every byte of the body."""
    max_bytes: int
    """The body, as received (a Content-Length over it is refused before reading)."""


def redact(url: str) -> str:
    """`url` without user and password (`https://***@host/…`), for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))


def _size(headers: Any) -> int | None:
    value = headers.get("content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def bounded_transport(http: ModuleType, inner: Any,
                      limits_for: Callable[[Any], Limits]) -> Any:
    """A transport of module `http` (httpx or httpx2) that enforces `limits_for(request)`
    on every exchange it passes to `inner`."""

    class Stream(http.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, raw: Any, limits: Limits, started: float, shown: str) -> None:
            self.raw, self.limits, self.started, self.shown = raw, limits, started, shown

        def __iter__(self) -> Iterator[bytes]:
            received = 0
            for chunk in self.raw:
                received += len(chunk)
                if received > self.limits.max_bytes:
                    raise AnswerRefused(f"the answer of {self.shown} is over "
                                        f"{self.limits.max_bytes:,} bytes")
                if time.monotonic() - self.started > self.limits.deadline_s:
                    raise AnswerRefused(f"the answer of {self.shown} took over "
                                        f"{self.limits.deadline_s:g} s")
                yield chunk

        def close(self) -> None:
            self.raw.close()

    class Transport(http.BaseTransport):  # type: ignore[name-defined,misc]
        def handle_request(self, request: Any) -> Any:
            limits = limits_for(request)
            shown = redact(str(request.url))
            # no single read may outlast the whole exchange's deadline
            timeout = dict(request.extensions.get("timeout") or {})
            for phase in ("connect", "read", "write", "pool"):
                value = timeout.get(phase)
                timeout[phase] = limits.deadline_s if value is None else \
                    min(value, limits.deadline_s)
            request.extensions["timeout"] = timeout
            started = time.monotonic()
            response = inner.handle_request(request)
            declared = _size(response.headers)
            if declared is not None and declared > limits.max_bytes:
                response.close()
                raise AnswerRefused(f"the answer of {shown} declares {declared:,} bytes; "
                                    f"the limit is {limits.max_bytes:,}")
            if time.monotonic() - started > limits.deadline_s:
                response.close()
                raise AnswerRefused(f"{shown} took over {limits.deadline_s:g} s to answer")
            response.stream = Stream(response.stream, limits, started, shown)
            return response

        def close(self) -> None:
            inner.close()

    return Transport()


def bounded_client(http: ModuleType, limits_for: Callable[[Any], Limits],
                   **options: Any) -> Any:
    """An `http.Client` (httpx or httpx2) whose every request is bounded by
    `limits_for(request)`. Built as the library builds it, so that the proxies the
    environment names (HTTPS_PROXY, NO_PROXY, ...) still apply (a client given its own
    transport ignores them: users behind a proxy could not reach the hub), then its
    transport and each proxy's are wrapped. No public API reaches them;
    tests/load/test_bounded_http.py fails if these attributes move."""
    client = http.Client(**options)
    client._transport = bounded_transport(http, client._transport, limits_for)
    mounts = client._mounts
    for pattern, transport in mounts.items():
        if transport is not None:
            mounts[pattern] = bounded_transport(http, transport, limits_for)
    return client


def client(http: ModuleType, limits: Limits, **options: Any) -> Any:
    """An `http.Client` (httpx or httpx2) whose every request is bounded by `limits`."""
    return bounded_client(http, lambda _request: limits, **options)
