"""Writing generated files: atomic, byte-deterministic, and able to tell what is stale.

A build first produces every file in memory. Only when all runbooks succeeded are files
written, each through a temporary file in the same folder and `os.replace`, so a reader
(or a build killed midway) sees either the old or the new bytes, never a half file.
Generated files are not fsync'ed: os.replace already gives the all-or-nothing view, and
what a power cut could lose the next build rewrites (fsync cost ~5 ms per runbook).
Temporary files a killed build leaves behind are removed by the next one.
Folders the build owns (`runbooks/<pair>/generated/`) are pruned of files it no longer makes.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def dump_json(data: Any) -> bytes:
    """The one JSON form of generated files: sorted keys, two-space indent, final newline."""
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


@dataclass
class Outputs:
    """Files a build produces, keyed by path relative to the repository root."""

    files: dict[Path, bytes] = field(default_factory=dict)
    owned_dirs: set[Path] = field(default_factory=set)

    def add(self, path: Path, content: bytes) -> None:
        if path in self.files and self.files[path] != content:
            raise ValueError(f"two generators wrote different content to {path}")
        self.files[path] = content


@dataclass(frozen=True)
class Drift:
    changed: list[Path]
    missing: list[Path]
    orphaned: list[Path]

    @property
    def stale(self) -> list[Path]:
        return sorted(self.changed + self.missing + self.orphaned)


def compare(root: Path, outputs: Outputs) -> Drift:
    changed, missing = [], []
    for rel, content in sorted(outputs.files.items()):
        target = root / rel
        if not target.is_file():
            missing.append(rel)
        elif target.read_bytes() != content:
            changed.append(rel)
    orphaned = []
    for rel_dir in sorted(outputs.owned_dirs):
        directory = root / rel_dir
        if directory.is_dir():
            for existing in sorted(directory.rglob("*")):
                rel = existing.relative_to(root)
                if existing.is_file() and rel not in outputs.files:
                    orphaned.append(rel)
    return Drift(changed, missing, orphaned)


def atomic_write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(root: Path, outputs: Outputs) -> Drift:
    """Bring the tree in line with `outputs`; returns what had to change."""
    drift = compare(root, outputs)
    for rel in drift.changed + drift.missing:
        atomic_write(root / rel, outputs.files[rel])
    for rel in drift.orphaned:
        (root / rel).unlink()
    return drift
