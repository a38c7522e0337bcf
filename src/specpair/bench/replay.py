"""Replay workloads: a captured request set (JSONL of OpenAI chat or completion requests)
sent unchanged, apart from the model name and the streaming options, to the target alone
and to the pair.

One request per line: `messages` (chat) or `prompt` (completion), `max_tokens` (or
`max_completion_tokens`), optional `temperature` (OpenAI's default 1.0 when absent),
`stop`, `seed`, `top_p`, `response_format` (a `json_schema` one is validated on the
answers), and an optional class label `"class"` (not an OpenAI field: removed before the
request is sent). The runbook names the file with its sha256, so a record always says
which request set it measured.

Prompt text stays in memory: records hold only the file's hash, counts, per-request
timings and acceptance, a digest of each answer, and statistics per class. Errors about
the file name its line and field, never its content.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specpair.bench import metrics
from specpair.load import file_policy
from specpair.load.document import bounded_json
from specpair.model.common import CLASS_LABEL, inert
from specpair.model.errors import SpecpairError

if TYPE_CHECKING:  # imported by the functions that send: `import httpx` loads its command
    # line too (click, rich, pygments), 114 modules every specpair command paid for
    import httpx

UNLABELLED = "unlabelled"
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "seed", "stop", "presence_penalty",
                 "frequency_penalty", "repetition_penalty", "response_format")
"""The request fields replayed as captured (the stop rule and sampling of each request)."""
DROPPED_KEYS = ("model", "stream", "stream_options", "n", "class")
"""Fields the replay sets itself: the served model, streaming with usage, one answer."""


@dataclass(frozen=True)
class ReplayRequest:
    index: int
    label: str
    chat: bool
    body: dict[str, Any]          # the captured request less DROPPED_KEYS
    max_tokens: int
    temperature: float
    schema: dict[str, Any] | None  # response_format.json_schema.schema, if any


@dataclass
class ReplaySample:
    """One answer, in memory; only `outcome()` goes into a record."""

    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float = 0.0
    output_tokens: int = 0
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    spec: dict[str, Any] | None = None   # vLLM's metrics.speculative_decoding
    acceptance: float | None = None
    error: str | None = None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


MAX_REPLAY_BYTES = 64 << 20
"""A captured request set of some thousands of long prompts; more is not a replay a
benchmark run can send (and is read whole, to check its digest)."""
LABEL = re.compile(CLASS_LABEL)


def read_replay(folder: Path, file: str, where: str) -> bytes:
    """The bytes of a replay file under the file policy: inside the pair's folder, no
    link on the way, a regular file (not /dev/zero or a FIFO), at most MAX_REPLAY_BYTES."""
    path = file_policy.absolute(folder / file)
    if not path.is_relative_to(file_policy.absolute(folder)) or not file_policy.inside_folder(file):
        raise SpecpairError.single(where, f"the replay file {inert(file)!r} lies outside the "
                                   "pair's folder", "commit it beside the runbook and name "
                                   "it relative to the runbook's folder")
    file_policy.check_below(folder, path)
    return file_policy.read_bytes(path, MAX_REPLAY_BYTES, path, what=(
        "a replay file is the captured request set of one benchmark run: sample it"))


def load(folder: Path, file: str, sha256: str, where: str) -> list[ReplayRequest]:
    """The requests of a replay file, after checking its digest against the runbook's."""
    path = folder / file
    data = read_replay(folder, file, where)
    got = digest(data)
    if got != sha256:
        raise SpecpairError.single(where, f"{path} has sha256 {got}, the runbook says {sha256}",
                                   "the request set changed: review it, then set the "
                                   "workload's sha256 to the new digest")
    requests: list[ReplayRequest] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if line.strip():
            requests.append(_request(line, len(requests), f"{path}:{number}"))
    if not requests:
        raise SpecpairError.single(where, f"{path} holds no request", "one JSON request a line")
    return requests


def _request(line: str, index: int, at: str) -> ReplayRequest:
    def refuse(what: str, hint: str) -> SpecpairError:
        return SpecpairError.single(at, what, hint)  # never the line itself: it is traffic

    raw = _bounded_json(line, refuse)
    if not isinstance(raw, dict):
        raise refuse("a line must be a JSON object", "one request object per line")
    chat = "messages" in raw
    if chat == ("prompt" in raw):
        raise refuse("a request needs exactly one of `messages` (chat) and `prompt` "
                     "(completion)", "capture the OpenAI request body as sent")
    if chat and not (isinstance(raw["messages"], list) and raw["messages"]):
        raise refuse("field `messages`: expected a non-empty list", "the chat messages")
    if not chat and not isinstance(raw["prompt"], str):
        raise refuse("field `prompt`: expected a string", "one prompt per request")
    limit = raw.get("max_tokens", raw.get("max_completion_tokens"))
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise refuse("field `max_tokens`: expected a positive integer",
                     "the stop rule must be replayed: give each request its max_tokens")
    temperature = raw.get("temperature", 1.0)
    if not isinstance(temperature, int | float) or isinstance(temperature, bool) \
            or not 0 <= temperature <= 2:
        raise refuse("field `temperature`: expected a number in [0, 2]", "as sent")
    label = raw.get("class", UNLABELLED)
    if not isinstance(label, str) or not LABEL.match(label):
        raise refuse("field `class`: expected a label of 1-64 letters, digits, `_.:-`",
                     "e.g. chat, json, code-review")
    if raw.get("n", 1) != 1:
        raise refuse("field `n`: the replay sends one answer per request",
                     "drop n, or split the request")
    schema = None
    fmt = raw.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise refuse("field `response_format.json_schema.schema`: expected an object",
                         "the JSON schema the answer must follow")
        _check_schema(schema, at)
    body = {k: v for k, v in raw.items() if k not in DROPPED_KEYS}
    return ReplayRequest(index, label, chat, body, limit, float(temperature), schema)


def _bounded_json(line: str, refuse: Callable[[str, str], SpecpairError]) -> Any:
    """One request line parsed with the runbooks' limits: nesting, size, numbers."""
    try:
        return bounded_json(line)
    except json.JSONDecodeError as exc:
        raise refuse(f"not JSON (column {exc.colno}: {exc.msg})",
                     "one JSON object per line") from None
    except ValueError as exc:
        raise refuse(str(exc), "one captured request per line, numbers as a client sends "
                     "them") from None


def _check_schema(schema: dict[str, Any], at: str) -> None:
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SpecpairError.single(at, f"response_format's JSON schema is invalid: "
                                   f"{exc.message}", "fix the schema") from None


def schema_valid(request: ReplayRequest, text: str) -> bool | None:
    """Does the answer parse as JSON and follow the request's schema? None without one."""
    if request.schema is None:
        return None
    import jsonschema

    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return False
    validator = jsonschema.validators.validator_for(request.schema)(request.schema)
    return bool(validator.is_valid(document))


def request_body(model: str, request: ReplayRequest,
                 extras: Mapping[str, Any]) -> dict[str, Any]:
    """The captured request with our model name and streaming, plus the engine release's
    replay fields (`BenchProbe.replay_extras`)."""
    return {**request.body, "model": model, "stream": True,
            "stream_options": {"include_usage": True}, **extras}


async def stream(client: httpx.AsyncClient, url: str, request: ReplayRequest,
                 body: dict[str, Any]) -> ReplaySample:
    import httpx

    sample = ReplaySample()
    path = "/v1/chat/completions" if request.chat else "/v1/completions"
    start = last = time.perf_counter()
    try:
        async with client.stream("POST", url + path, json=body) as response:
            if response.status_code != 200:
                await response.aread()
                # the status only: an engine's error text can quote the prompt
                sample.error = f"HTTP {response.status_code}"
                return sample
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                now = time.perf_counter()
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") if request.chat \
                        else choice.get("text")
                    ids = choice.get("token_ids")
                    if isinstance(ids, list):
                        sample.token_ids.extend(int(i) for i in ids)
                    if piece or ids:
                        if sample.ttft_s is None:
                            sample.ttft_s = now - start
                        else:
                            sample.itl_s.append(now - last)
                        last = now
                        sample.text += piece or ""
                usage = chunk.get("usage")
                if usage and usage.get("completion_tokens") is not None:
                    sample.output_tokens = int(usage["completion_tokens"])
                found = (chunk.get("metrics") or {}).get("speculative_decoding") \
                    if isinstance(chunk.get("metrics"), dict) else None
                if isinstance(found, dict):
                    sample.spec = found
                accepted = metrics.response_acceptance(chunk)
                if accepted is not None:
                    sample.acceptance = accepted
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        sample.error = type(exc).__name__
    sample.e2e_s = time.perf_counter() - start
    if sample.error is None and sample.ttft_s is None and not sample.output_tokens:
        sample.error = "the stream returned no token"
    return sample


async def run_load(url: str, model: str, requests: list[ReplayRequest],
                   extras: Mapping[str, Any],
                   concurrency: int, time_limit_s: float
                   ) -> tuple[dict[int, ReplaySample], float, bool]:
    """Every request at the given concurrency, in file order; stops starting new ones at
    the time limit (the run is then marked truncated)."""
    import asyncio

    import httpx

    pending = list(reversed(requests))
    samples: dict[int, ReplaySample] = {}
    deadline = time.perf_counter() + time_limit_s
    truncated = False
    timeout = httpx.Timeout(max(time_limit_s, 30.0), connect=10.0)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal truncated
        while pending:
            if time.perf_counter() > deadline:
                truncated = True
                return
            request = pending.pop()
            try:
                samples[request.index] = await asyncio.wait_for(
                    stream(client, url, request, request_body(model, request, extras)),
                    deadline - time.perf_counter())
            except TimeoutError:
                truncated = True
                return

    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=timeout) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return samples, time.perf_counter() - start, truncated
