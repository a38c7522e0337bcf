"""A content-addressed cache of generated site pages (`site/.cache/pages/`, not committed).

A pair's page is a pure function of the resolved pair (runbook, lock, measurements), its
change checklist, and the code and libraries that draw it: planning every candidate costs
most of a second a pair, so a catalogue regenerated
after one change redraws only that pair. The key hashes all of those inputs: specpair's
own files (sources and data), the versions of its dependencies, the pair as JSON and the
checklist text. An entry is written atomically and read whole; a run keeps only the
entries it used.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from specpair.write.writer import atomic_write

FORMAT = "specpair.page-cache/1"
LIBRARIES = ("PyYAML", "grafana-foundation-sdk", "pydantic", "jsonnet",
             "huggingface_hub")


@cache
def code_digest() -> str:
    """specpair's files and its libraries' versions: any change invalidates every page."""
    digest = hashlib.sha256(FORMAT.encode())
    package = Path(__file__).resolve().parents[1]  # the whole specpair package
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    for name in LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}={version}\0".encode())
    return digest.hexdigest()


def key(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((code_digest() + blob).encode()).hexdigest()


class PageCache:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.used: set[str] = set()

    def get(self, name: str) -> tuple[str, dict[str, bytes], dict[str, object]] | None:
        self.used.add(name)
        path = self.folder / f"{name}.json"
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if entry.get("format") != FORMAT:
            return None
        files = {k: base64.b64decode(v) for k, v in entry["files"].items()}
        return entry["page"], files, entry["summary"]

    def put(self, name: str, page: str, files: dict[str, bytes],
            summary: dict[str, object]) -> None:
        self.used.add(name)
        entry = {"format": FORMAT, "page": page, "summary": summary,
                 "files": {k: base64.b64encode(v).decode() for k, v in sorted(files.items())}}
        atomic_write(self.folder / f"{name}.json", json.dumps(entry).encode())

    def prune(self) -> None:
        """Drop the entries this run did not use (pairs removed or changed)."""
        if not self.folder.is_dir():
            return
        for path in self.folder.glob("*.json"):
            if path.stem not in self.used:
                path.unlink(missing_ok=True)
