from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.paths import REPO


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A scratch copy of the repository's runbooks and committed outputs."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(REPO / "runbooks", root / "runbooks")
    shutil.copytree(REPO / "schema", root / "schema")
    return root
