"""Hugging Face Hub access for `specpair lock`, through huggingface_hub, never weights.

- the revision (branch, tag or commit) becomes a commit with `model_info`, which also lists
  every file with its size (the download size of the artifact);
- config.json and the tokenizer files are fetched whole (small) into a temporary folder;
- each safetensors shard's header is read with HTTP range requests
  (`parse_safetensors_file_metadata`: the first 100 kB, then the rest of the header if it
  is larger), so locking a 250 GB checkpoint moves kilobytes.

huggingface_hub reads HF_ENDPOINT (mirrors), HF_TOKEN and HF_HUB_OFFLINE itself; the token
is only ever sent to the endpoint, never stored in a lock or printed. Rate limits (429)
and server errors (5xx) are retried with exponential backoff; a timeout or a refused
connection is retried too, then reported.

Every answer is bounded (`load.bounded_http`): one deadline per request, and a size per kind
of answer (API listings, whole small files, the ranged reads of safetensors headers, which
may not exceed the range asked for); at most MAX_SHARDS headers are read; an answer the
client cannot parse is a located error, and the previous lock is kept.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx2 as httpx  # the HTTP client huggingface_hub 2.x is built on
from huggingface_hub import HfApi, set_client_factory
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    SafetensorsParsingError,
)

from specpair.load.bounded_http import AnswerRefused, Limits, bounded_client
from specpair.model.errors import SpecpairError
from specpair.model.lock import Source

T = TypeVar("T")
MAX_PARALLEL_SHARDS = 4
MAX_SHARDS = 2048
"""Headers read per checkpoint: the largest published checkpoints have a few hundred
shards (DeepSeek-V3: 163; Llama-3.1-405B: 191); a listing of 100,000 is no checkpoint."""
MAX_API_BYTES = 32 << 20
"""A repository listing: 100,000 files with their sizes is about 10 MB."""
MAX_WHOLE_FILE_BYTES = 64 << 20
"""config.json, the tokenizer files, the shard index (large tokenizer.json files: ~35 MB),
wherever the hub redirects their download."""
RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def _setting(name: str, default: float) -> float:
    """Retries, backoff and timeout can be tuned per run (SPECPAIR_HUB_RETRIES, …)."""
    return float(os.environ.get(f"SPECPAIR_HUB_{name}", default))


def timeout_s() -> float:
    return _setting("TIMEOUT_S", 10.0)


def deadline_s() -> float:
    """The whole of one request (every byte of its answer included)."""
    return _setting("DEADLINE_S", 120.0)


def limits_for(request: Any) -> Limits:
    """What one hub answer may be: a ranged read no more than its range (a server that
    ignores the range would send a whole shard), an API answer or a whole small file its
    kind's maximum."""
    ranged = RANGE.fullmatch(request.headers.get("range", ""))
    path = request.url.path
    if ranged:
        size = int(ranged.group(2)) - int(ranged.group(1)) + 1
    elif path.startswith("/api/"):
        size = MAX_API_BYTES
    else:
        size = MAX_WHOLE_FILE_BYTES
    return Limits(deadline_s(), max(size, 0))


def _bounded_client() -> httpx.Client:
    # huggingface_hub's own client adds its request hook (user agent, request ids); the
    # hook is private to huggingface_hub, so its absence only loses those headers
    try:
        from huggingface_hub.utils._http import hf_request_event_hook
        hooks = {"request": [hf_request_event_hook]}
    except ImportError:
        hooks = {}
    client: httpx.Client = bounded_client(httpx, limits_for, event_hooks=hooks,
                                          follow_redirects=True, timeout=None)
    return client


_installed = False


def bound_hub_answers() -> None:
    """Every request huggingface_hub makes in this process goes through the limits."""
    global _installed
    if not _installed:
        set_client_factory(_bounded_client)
        _installed = True


def _status(exc: HfHubHTTPError) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def call(where: str, what: str, fn: Callable[[], T]) -> T:
    """Run one hub request; retry what may pass later; turn the rest into clear errors."""
    delay = _setting("BACKOFF_S", 0.5)
    retries = int(_setting("RETRIES", 4))
    for attempt in range(1, retries + 1):
        try:
            return fn()
        except GatedRepoError:
            raise SpecpairError.single(
                where, f"{what}: the repository is gated (401/403)",
                "accept its terms on the hub with your account and export HF_TOKEN") from None
        except RevisionNotFoundError:
            raise SpecpairError.single(
                where, f"{what}: no such revision (404)",
                "check `revision:`: a commit, branch or tag of this repo") from None
        except RepositoryNotFoundError:
            raise SpecpairError.single(
                where, f"{what}: no such repository, or it is private (404/401)",
                "check `repo:`; for a private repo export HF_TOKEN") from None
        except EntryNotFoundError:
            raise SpecpairError.single(where, f"{what}: the file is missing (404)",
                                       "check that the revision holds a full checkpoint") from None
        except OfflineModeIsEnabled:
            raise SpecpairError.single(where, f"{what}: HF_HUB_OFFLINE is set",
                                       "unset it, or lock with --offline") from None
        except HfHubHTTPError as exc:
            status = _status(exc)
            if status is not None and (status == 429 or status >= 500) and attempt < retries:
                retry_after = exc.response.headers.get("Retry-After") if exc.response else None
                time.sleep(min(float(retry_after), 30.0) if retry_after and
                           retry_after.isdigit() else delay)
                delay *= 2
                continue
            if status in (401, 403):
                raise SpecpairError.single(
                    where, f"{what}: access refused ({status})",
                    "export HF_TOKEN with read access to this repository") from None
            raise SpecpairError.single(
                where, f"{what}: the hub answered {status}" + (
                    f" after {attempt} attempts" if attempt > 1 else ""),
                "try again later, or set HF_ENDPOINT to a reachable mirror") from None
        except AnswerRefused as exc:
            raise SpecpairError.single(
                where, f"{what}: {exc.reason}",
                "a hub answers listings and headers in kilobytes: check HF_ENDPOINT (set "
                "SPECPAIR_HUB_DEADLINE_S for a slow link); the previous lock is kept") from None
        except (SafetensorsParsingError, json.JSONDecodeError, KeyError, TypeError,
                ValueError, AttributeError, OverflowError, RecursionError) as exc:
            raise SpecpairError.single(
                where, f"{what}: the hub's answer is malformed ({type(exc).__name__})",
                "check HF_ENDPOINT points at a Hugging Face hub or mirror; the previous lock "
                "is kept") from None
        except (httpx.TimeoutException, httpx.TransportError, OSError) as exc:
            if attempt < retries:
                time.sleep(delay)
                delay *= 2
                continue
            kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
            raise SpecpairError.single(
                where, f"{what}: the connection {kind} after {attempt} attempts "
                f"({type(exc).__name__})",
                "check the network or HF_ENDPOINT; the previous lock is kept") from None
    raise AssertionError("unreachable")


def _listing(where: str, info: Any) -> dict[str, int]:
    """The revision's files and sizes, each checked: a name, a size a file can have."""
    if not re.fullmatch(r"[0-9a-f]{40}", str(info.sha or "")):
        raise SpecpairError.single(where, f"the hub answered no commit for the revision "
                                   f"({str(info.sha)[:60]!r})", "check HF_ENDPOINT")
    files: dict[str, int] = {}
    for sibling in info.siblings or []:
        name, size = sibling.rfilename, sibling.size or 0
        if not isinstance(name, str) or not isinstance(size, int) or isinstance(size, bool) \
                or not 0 <= size < 1 << 50:
            raise SpecpairError.single(where, f"the hub listed a file as {str(name)[:80]!r} "
                                       f"of size {str(size)[:40]}", "check HF_ENDPOINT")
        files[name] = size
    return files


class HubCheckpoint:
    """One revision of a hub repo, pinned to the commit it resolves to."""

    def __init__(self, repo: str, revision: str, api: HfApi | None = None) -> None:
        self.repo = repo
        bound_hub_answers()
        self.api = api or HfApi()
        self.where = f"hub:{repo}@{revision}"
        info = call(self.where, "repository info", lambda: self.api.model_info(
            repo, revision=revision, files_metadata=True, timeout=timeout_s()))
        self.commit: str = str(info.sha)
        self._files = _listing(self.where, info)
        self.provenance = f"hub@{self.commit}"
        self.source = Source(repo=repo, revision=revision, commit=self.commit)
        self._tmp = tempfile.TemporaryDirectory(prefix="specpair-lock-")

    def files(self) -> dict[str, int]:
        return dict(sorted(self._files.items()))

    def read(self, name: str) -> bytes:
        listed = self._files.get(name, 0)
        if listed > MAX_WHOLE_FILE_BYTES:  # a download the hub's storage may serve by itself
            raise SpecpairError.single(
                self.where, f"{name} is listed at {listed:,} bytes; specpair reads at most "
                f"{MAX_WHOLE_FILE_BYTES:,} of a configuration or tokenizer file",
                "check `repo:` and `revision:`; the previous lock is kept")
        path = call(self.where, name, lambda: self.api.hf_hub_download(
            self.repo, name, revision=self.commit, cache_dir=self._tmp.name,
            etag_timeout=timeout_s()))
        return Path(path).read_bytes()

    def headers(self) -> dict[str, dict[str, Any]]:
        shards = [f for f in self._files if f.endswith(".safetensors")]
        if len(shards) > MAX_SHARDS:
            raise SpecpairError.single(
                self.where, f"the revision lists {len(shards):,} safetensors files; specpair "
                f"reads at most {MAX_SHARDS:,} headers", "check `repo:` and `revision:` name "
                "a model checkpoint; the previous lock is kept")

        def header(name: str) -> dict[str, Any]:
            meta = call(self.where, f"header of {name}",
                        lambda: self.api.parse_safetensors_file_metadata(
                            self.repo, name, revision=self.commit, timeout=timeout_s()))
            return {tensor: {"dtype": info.dtype, "shape": list(info.shape),
                             "data_offsets": list(info.data_offsets)}
                    for tensor, info in meta.tensors.items()}

        with ThreadPoolExecutor(max_workers=MAX_PARALLEL_SHARDS) as pool:
            return dict(zip(shards, pool.map(header, shards), strict=True))
