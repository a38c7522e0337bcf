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
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx2 as httpx  # the HTTP client huggingface_hub 2.x is built on
from huggingface_hub import HfApi
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from specpair.model.errors import SpecpairError
from specpair.model.lock import Source

T = TypeVar("T")
MAX_PARALLEL_SHARDS = 4


def _setting(name: str, default: float) -> float:
    """Retries, backoff and timeout can be tuned per run (SPECPAIR_HUB_RETRIES, …)."""
    return float(os.environ.get(f"SPECPAIR_HUB_{name}", default))


def timeout_s() -> float:
    return _setting("TIMEOUT_S", 10.0)


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


class HubCheckpoint:
    """One revision of a hub repo, pinned to the commit it resolves to."""

    def __init__(self, repo: str, revision: str, api: HfApi | None = None) -> None:
        self.repo = repo
        self.api = api or HfApi()
        self.where = f"hub:{repo}@{revision}"
        info = call(self.where, "repository info", lambda: self.api.model_info(
            repo, revision=revision, files_metadata=True, timeout=timeout_s()))
        self.commit: str = str(info.sha)
        self._files = {s.rfilename: int(s.size or 0) for s in (info.siblings or [])}
        self.provenance = f"hub@{self.commit}"
        self.source = Source(repo=repo, revision=revision, commit=self.commit)
        self._tmp = tempfile.TemporaryDirectory(prefix="specpair-lock-")

    def files(self) -> dict[str, int]:
        return dict(sorted(self._files.items()))

    def read(self, name: str) -> bytes:
        path = call(self.where, name, lambda: self.api.hf_hub_download(
            self.repo, name, revision=self.commit, cache_dir=self._tmp.name,
            etag_timeout=timeout_s()))
        return Path(path).read_bytes()

    def headers(self) -> dict[str, dict[str, Any]]:
        shards = [f for f in self._files if f.endswith(".safetensors")]

        def header(name: str) -> dict[str, Any]:
            meta = call(self.where, f"header of {name}",
                        lambda: self.api.parse_safetensors_file_metadata(
                            self.repo, name, revision=self.commit, timeout=timeout_s()))
            return {tensor: {"dtype": info.dtype, "shape": list(info.shape),
                             "data_offsets": list(info.data_offsets)}
                    for tensor, info in meta.tensors.items()}

        with ThreadPoolExecutor(max_workers=MAX_PARALLEL_SHARDS) as pool:
            return dict(zip(shards, pool.map(header, shards), strict=True))
