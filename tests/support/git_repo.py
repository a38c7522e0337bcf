"""A scratch git repository of the examples, and commits and edits in it
(the impact and workflow tests)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.paths import REPO


def sh(root: Path, *args: str) -> None:
    subprocess.run(args, cwd=root, check=True, capture_output=True)


def examples_repo(tmp_path: Path) -> Path:
    """A git repository (one commit) of the examples' runbooks, without their outputs."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(REPO / "runbooks", root / "runbooks")
    for path in root.glob("runbooks/*/generated"):
        shutil.rmtree(path)
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return root


def commit(root: Path, change: Callable[[Path], None]) -> None:
    change(root)
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "head")


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new))
