from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A scratch copy of the repository's runbooks and committed outputs."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(REPO / "runbooks", root / "runbooks")
    shutil.copytree(REPO / "schema", root / "schema")
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
