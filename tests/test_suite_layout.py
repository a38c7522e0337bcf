"""The test suite's own layout (issue 55): no test module or conftest imports a test module
or a conftest.

Shared helpers live in non-test modules (`tests/support/`, and `tests/engine/support.py`
and its neighbours for the engine oracles), so that a test file can be moved, split or
edited without breaking another one, and pytest imports each conftest only as a conftest.
Every import counts: module-level and inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import TESTS


def _is_test_module(name: str) -> bool:
    """`tests.test_x`, `tests.engine.test_x`, any `....conftest`."""
    parts = name.split(".")
    return parts[0] == "tests" and (parts[-1].startswith("test_") or parts[-1] == "conftest")


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) for each import in the file; `from tests.engine import test_x`
    names the module `tests.engine.test_x`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def _checked() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py")
                  if p.name.startswith("test_") or p.name == "conftest.py")


def test_no_test_module_or_conftest_imports_another() -> None:
    offenders = [f"{path.relative_to(TESTS.parent)}:{line}: imports {module}"
                 for path in _checked() for line, module in _imported(path)
                 if _is_test_module(module)]
    assert not offenders, "\n".join(offenders)


def test_the_check_sees_the_suite_and_recognises_test_modules() -> None:
    checked = {p.relative_to(TESTS).as_posix() for p in _checked()}
    assert {"conftest.py", "engine/conftest.py", "test_suite_layout.py"} <= checked
    assert _is_test_module("tests.test_launch")
    assert _is_test_module("tests.engine.test_kv_oracle")
    assert _is_test_module("tests.engine.conftest")
    assert _is_test_module("tests.conftest")
    assert not _is_test_module("tests.support.pairs")
    assert not _is_test_module("tests.engine.support")
    assert not _is_test_module("specpair.analyse.test_points")
