"""Where the repository and the test fixtures are, and a small file-writing helper.

Test modules import these from here (not from `tests.conftest`, which holds only fixtures),
so that no test module depends on a conftest or on another test module.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
