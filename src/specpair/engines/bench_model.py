"""What `specpair bench` needs of an engine release: the request fields that make it report
per-request acceptance, and how to check that a server runs the runbook's draft."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from specpair.engines.pair_input import EngineInput


class FallbackError(Exception):
    """The server does not speculate the way the runbook says (or at all)."""


GetJson = Callable[[str], dict[str, Any]]
"""GET a path of the speculative server, its JSON body."""


@dataclass(frozen=True)
class BenchProbe:
    request_extras: Mapping[str, Any]
    """Fields added to every completion request."""
    replay_extras: Mapping[str, Any]
    """Fields added to every replayed request (`kind: replay`): the answer's token ids
    where the release can return them (token-for-token comparison) and its per-request
    acceptance."""
    draft_positions: Callable[[EngineInput], int | None]
    """The draft tokens per step the server's per-position counter must show (None where
    the release exports no such counter)."""
    check_server: Callable[[EngineInput, GetJson], None]
    """Raises FallbackError when the server's own report of its resolved
    arguments disagrees with the runbook (a no-op where the release has no such report)."""
    without_speculation: Mapping[str, Any] | None = None
    """Request fields that make the same speculative server answer one request without
    speculation (the canary's lossless check at temperature 0); None where the release
    has no such switch, and `without_speculation_why` says so."""
    without_speculation_why: str = ""
