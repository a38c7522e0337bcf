"""A streaming OpenAI-compatible client that times each token of each request."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from specpair.bench import metrics
from specpair.bench.record import RunResult, Stats
from specpair.bench.workloads import Request


@dataclass
class Sample:
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float = 0.0
    output_tokens: int = 0
    acceptance: float | None = None
    text: str = ""
    error: str | None = None


def request_body(model: str, req: Request, extras: Mapping[str, Any],
                 stream: bool = True) -> dict[str, Any]:
    """A completion request; `extras` are the engine release's own fields
    (`EngineRelease.request_extras`: what makes it report per-request acceptance)."""
    body: dict[str, Any] = {"model": model, "prompt": req.prompt, "max_tokens": req.max_tokens,
                            "temperature": req.temperature, "ignore_eos": True,
                            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    body.update(extras)
    return body


async def stream_one(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Sample:
    sample = Sample()
    start = time.perf_counter()
    last = start
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")[:300]
                sample.error = f"HTTP {response.status_code}: {text}"
                return sample
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                now = time.perf_counter()
                choices = chunk.get("choices") or []
                piece = choices[0].get("text", "") if choices else ""
                if piece:
                    if sample.ttft_s is None:
                        sample.ttft_s = now - start
                    else:
                        sample.itl_s.append(now - last)
                    last = now
                    sample.text += piece
                usage = chunk.get("usage")
                if usage and usage.get("completion_tokens") is not None:
                    sample.output_tokens = int(usage["completion_tokens"])
                accepted = metrics.response_acceptance(chunk)
                if accepted is not None:
                    sample.acceptance = accepted
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        sample.error = f"{type(exc).__name__}: {exc}"
    sample.e2e_s = time.perf_counter() - start
    if sample.error is None and sample.ttft_s is None:
        sample.error = "the stream returned no text"
    return sample


async def run_load(url: str, model: str, requests: list[Request], extras: Mapping[str, Any],
                   concurrency: int,
                   time_limit_s: float, progress: Callable[[int, int], None] | None = None
                   ) -> tuple[list[Sample], float, bool]:
    """All requests at the given concurrency; stops starting new ones at the time limit."""
    queue: asyncio.Queue[Request] = asyncio.Queue()
    for req in requests:
        queue.put_nowait(req)
    samples: list[Sample] = []
    deadline = time.perf_counter() + time_limit_s
    truncated = False
    timeout = httpx.Timeout(max(time_limit_s, 30.0), connect=10.0)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal truncated
        while not queue.empty():
            if time.perf_counter() > deadline:
                truncated = True
                return
            req = queue.get_nowait()
            remaining = deadline - time.perf_counter()
            try:
                sample = await asyncio.wait_for(
                    stream_one(client, url, request_body(model, req, extras)), remaining)
            except TimeoutError:
                truncated = True
                return
            samples.append(sample)
            if progress:
                progress(len(samples), len(requests))

    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=timeout) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return samples, time.perf_counter() - start, truncated


def summarize(server: str, samples: list[Sample], wall_s: float, truncated: bool,
              total_requests: int, delta: metrics.CounterDelta | None) -> RunResult:
    ok = [s for s in samples if s.error is None]
    tokens = sum(s.output_tokens or (len(s.itl_s) + 1) for s in ok)
    tpot = [(s.e2e_s - (s.ttft_s or 0)) / max(1, (s.output_tokens or len(s.itl_s) + 1) - 1)
            for s in ok]
    counters = {}
    if delta is not None:
        counters = {"verify_steps": delta.verify_steps, "accepted": delta.accepted,
                    "drafted": delta.drafted, "generated": delta.generated}
    return RunResult(
        server=server, requests=total_requests, succeeded=len(ok),
        failed=len(samples) - len(ok), truncated=truncated, wall_s=round(wall_s, 4),
        output_tokens=tokens, output_throughput=round(tokens / wall_s, 3) if wall_s else 0.0,
        ttft_s=Stats.of([s.ttft_s for s in ok if s.ttft_s is not None]),
        tpot_s=Stats.of(tpot), itl_s=Stats.of([x for s in ok for x in s.itl_s]),
        e2e_s=Stats.of([s.e2e_s for s in ok]),
        acceptance_per_request=[round(s.acceptance, 4) for s in ok if s.acceptance is not None],
        acceptance_aggregate=round(delta.acceptance_length, 4)
        if delta is not None and delta.acceptance_length is not None else None,
        counters=counters,
        accepted_per_position=list(delta.accepted_per_position) if delta is not None else [],
        errors=sorted({s.error for s in samples if s.error})[:10])
