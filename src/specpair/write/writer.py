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

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from specpair.load import file_policy
from specpair.model.errors import SpecpairError


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


def holds(target: Path, content: bytes) -> bool | None:
    """Whether `target` holds exactly `content`: None when it is missing, False when it
    differs or is not a regular file (writing it then says why). Read without following
    a link and never more than one byte past the expected size."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise file_policy.io_error(target, exc, "inspect the file") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size != len(content):
        return False
    return file_policy.read_bytes(target, len(content)) == content


def compare(root: Path, outputs: Outputs) -> Drift:
    """What a write would change. A link in the trees the build owns is refused first,
    so neither a check nor a build reads or writes through one."""
    file_policy.check_tree(root)
    changed, missing = [], []
    for rel, content in sorted(outputs.files.items()):
        same = holds(root / rel, content)
        if same is None:
            missing.append(rel)
        elif not same:
            changed.append(rel)
    orphaned = []
    for rel_dir in sorted(outputs.owned_dirs):
        directory = root / rel_dir
        if directory.is_dir() and not directory.is_symlink():
            for existing in file_policy.walk_files(directory):
                rel = existing.relative_to(root)
                if rel not in outputs.files:
                    orphaned.append(rel)
    return Drift(changed, missing, orphaned)


def atomic_write(path: Path, content: bytes) -> None:
    """Write under the file policy (see file_policy.atomic_write)."""
    file_policy.atomic_write(path, content)


def write_readable(path: Path, content: bytes, limit: int, what: str) -> None:
    """Write a file that specpair reads back (a lock, a record) only if its loader will
    accept it: an output over the loader's limit would make every later command refuse the
    pair, so it is refused here, with the previous file kept."""
    if len(content) > limit:
        raise SpecpairError.single(path, f"the {what} would be {len(content):,} bytes; the "
                                   f"loader reads at most {limit:,}, so it is not written",
                                   "nothing was changed: fewer requests (a sampled replay "
                                   "set) or a smaller checkpoint listing keep it readable")
    atomic_write(path, content)


def write(root: Path, outputs: Outputs) -> Drift:
    """Bring the tree in line with `outputs`; returns what had to change."""
    drift = compare(root, outputs)
    for rel in drift.changed + drift.missing:
        atomic_write(root / rel, outputs.files[rel])
    for rel in drift.orphaned:
        file_policy.remove(root / rel)
    return drift
