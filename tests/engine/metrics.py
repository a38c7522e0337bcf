"""Talking to a running engine and to Prometheus: completions, metric scrapes and queries."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

from tests.engine.support import Server

PAIR = "tiny-vllm"


def complete(server: Server, model: str) -> None:
    out = json.loads(server.request("/v1/completions", {
        "model": model, "prompt": "one two three four five six", "max_tokens": 24,
        "temperature": 0}, timeout=300))
    assert out["choices"]


def query(url: str, expr: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?"
                                + urllib.parse.urlencode({"query": expr}), timeout=30) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def counter(metrics: str, name: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total
