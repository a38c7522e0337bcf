"""The layer contract of src/specpair (issue 55): folders are the stages, imports run only
downward, modules and functions stay small, and only the loading and writing stages touch
files.

Every import counts here: module-level, inside a function, and under `if TYPE_CHECKING:`
(an annotation import is still a dependency a reader must follow, and it is what closed
the old 30-module circle): none runs upward and none closes a cycle. The allowlists below
record what is still out of contract (sizes and file access); each may only shrink: an
entry that no longer applies, or that grew, fails the test too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.import_graph import SRC, cycles, graph, modules

# The stages, lowest first. A module may import its own stage and any lower one; `load`,
# `lock` and `bench` (the measurement records and the protocol's client) are one stage.
STAGES: dict[str, int] = {
    "model": 0,      # types: runbook and lock schemas, geometry, errors, findings
    "facts": 1,      # reviewed catalogue data and their typed loaders
    "engines": 2,    # one package per engine release, and their shared interface
    "load": 3,       # runbooks, locks, records and logs read from disk
    "lock": 3,       # artifacts resolved into lock facts
    "bench": 3,      # the measurement protocol's workloads, client and records
    "resolve": 4,    # runbook + lock → a resolved pair
    "analyse": 5,    # every number of a pair
    "generate": 6,   # pure: analysis in, bytes out
    "write": 7,      # the only writers
    "commands": 8,   # one module per command
    "cli": 9,        # wiring and the one error formatter
    "__main__": 9,
}


# Modules over 500 lines, with the most lines each may have. May only shrink.
LONG_MODULES: dict[str, int] = {}

# Functions over 80 lines ("module:function"), with the most lines each may have.
LONG_FUNCTIONS: dict[str, int] = {}

# Where files are opened, written, moved or removed: the loading stages (the facts'
# package data, runbooks and records, artifacts) and the writing stage.
FILE_STAGES = {"facts", "load", "lock", "write"}
FILE_CALLS = {"open", "write_text", "write_bytes", "read_text", "read_bytes", "unlink",
              "rmtree", "rename", "replace", "mkdir", "touch", "symlink_to", "chmod"}
# Modules outside those stages that still touch files ("module:call"). May only shrink.
FILE_TOUCH_ALLOWED: set[str] = {
    "specpair.commands.build:open",  # the build's flock on runbooks/
    "specpair.commands.impact:mkdir",  # a scratch folder of its own for the base revision
    "specpair.commands.init:mkdir",  # the target folder, and a scratch folder for the lock
    "specpair.commands.init:read_bytes",  # the packaged templates
    "specpair.commands.init:write_bytes",  # the example into that scratch folder
    "specpair.commands.staging_ingest:read_text",  # the deployment log, size-checked
    "specpair.engines.registry:read_text",  # a release's own data files (its folder)
}

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def stage(module: str) -> int:
    """The stage of a dotted module name under specpair (the package itself: below all)."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    if parts[1] not in STAGES:
        raise AssertionError(f"{module} sits in no stage folder: move it into one of "
                             f"{sorted(STAGES)}")
    return STAGES[parts[1]]


def upward(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in edges.items() for b in targets
            if b != "specpair" and stage(b) > stage(a)}


def _all_imports(src: Path = SRC) -> dict[str, set[str]]:
    return graph(src, annotations=True)


def test_every_module_sits_in_a_stage_folder() -> None:
    loose = [m for m in modules() if m.count(".") >= 1 and m.split(".")[1] not in STAGES]
    assert not loose, f"modules outside the stage folders: {loose}"


def test_imports_run_only_downward() -> None:
    found = sorted(upward(_all_imports()))
    assert not found, "imports from a lower stage to a higher one:\n" + "\n".join(
        f"  {a} → {b}" for a, b in found)


def test_no_import_cycle_counting_annotation_imports() -> None:
    found = cycles(_all_imports())
    assert not found, "import cycles:\n" + "\n".join(" → ".join(c) for c in found)


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    long_modules: dict[str, int] = {}
    long_functions: dict[str, int] = {}
    for name, path in modules().items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            long_modules[name] = lines
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions[f"{name}:{node.name}"] = length
    return long_modules, long_functions


def _ratchet(kind: str, found: dict[str, int], allowed: dict[str, int], limit: int) -> None:
    grown = {k: (v, allowed[k]) for k, v in found.items() if k in allowed and v > allowed[k]}
    new = {k: v for k, v in found.items() if k not in allowed}
    gone = sorted(set(allowed) - set(found))
    assert not new, f"{kind} over {limit} lines: {new}; split them"
    assert not grown, f"{kind} on the allowlist grew (now, allowed): {grown}"
    assert not gone, f"{kind} now within {limit} lines; remove from the allowlist: {gone}"


def test_no_module_over_500_lines() -> None:
    _ratchet("modules", _sizes()[0], LONG_MODULES, MAX_MODULE_LINES)


def test_no_function_over_80_lines() -> None:
    _ratchet("functions", _sizes()[1], LONG_FUNCTIONS, MAX_FUNCTION_LINES)
    assert not LONG_FUNCTIONS, "no function is over 80 lines: keep it so"
    assert not LONG_MODULES, "no module is over 500 lines: keep it so"


def file_touches(src: Path = SRC) -> set[str]:
    """'module:call' for every call that opens, writes, moves or removes a file outside
    the loading and writing stages (a method or function of that name, whatever the
    receiver: `Path.write_text`, `os.replace`, `shutil.rmtree`, builtin `open`)."""
    found: set[str] = set()
    for name, path in modules(src).items():
        parts = name.split(".")
        if len(parts) > 1 and parts[1] in FILE_STAGES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else (
                func.id if isinstance(func, ast.Name) else None)
            if called not in FILE_CALLS:
                continue
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                    func.value.id == "file_policy":  # the policy's own functions
                continue
            # os.replace(a, b), or a path's .replace(target)/.rename(target): not a
            # string's replace(old, new) nor dataclasses.replace(obj, field=...)
            if called in ("replace", "rename") and not (isinstance(func, ast.Attribute) and (
                    (isinstance(func.value, ast.Name) and func.value.id == "os")
                    or (len(node.args) == 1 and not node.keywords))):
                continue
            found.add(f"{name}:{called}")
    return found


def test_only_the_loading_and_writing_stages_touch_files() -> None:
    found = file_touches()
    new = sorted(found - FILE_TOUCH_ALLOWED)
    gone = sorted(FILE_TOUCH_ALLOWED - found)
    assert not new, f"file access outside load/ and write/: {new}"
    assert not gone, f"no longer touches files; remove from FILE_TOUCH_ALLOWED: {gone}"


# The contract's own checks fail on the violations they exist for.

def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "specpair" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("placement", [
    "from specpair.analyse.x import y\n",
    "def f():\n    from specpair.analyse.x import y\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from specpair.analyse.x import y\n",
])
def test_an_upward_import_is_found_wherever_it_is_placed(tmp_path: Path,
                                                         placement: str) -> None:
    src = _tree(tmp_path, {"__init__.py": "", "model/__init__.py": "",
                           "model/a.py": placement, "analyse/__init__.py": "",
                           "analyse/x.py": "y = 1\n"})
    assert ("specpair.model.a", "specpair.analyse.x") in upward(graph(src, annotations=True))


def test_a_downward_import_is_no_violation(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"__init__.py": "", "model/__init__.py": "", "model/a.py": "y = 1\n",
                           "analyse/__init__.py": "",
                           "analyse/x.py": "from specpair.model.a import y\n"})
    assert upward(graph(src, annotations=True)) == set()


def test_a_cycle_closed_by_an_annotation_import_counts(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "from specpair import b\n",
        "b.py": ("from typing import TYPE_CHECKING\n"
                 "if TYPE_CHECKING:\n    from specpair.a import T\n"),
    })
    assert cycles(graph(src, annotations=True)) == [["specpair.a", "specpair.b"]]


def test_a_file_write_outside_the_writing_stages_is_found(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"__init__.py": "", "analyse/__init__.py": "",
                           "analyse/x.py": ("from pathlib import Path\n"
                                            "def f(p: Path) -> str:\n"
                                            "    p.write_text('x')\n"
                                            "    return 'a'.replace('a', 'b')\n"),
                           "analyse/y.py": ("from specpair.load import file_policy\n"
                                            "def g(p):\n"
                                            "    return file_policy.read_bytes(p)\n"),
                           "write/__init__.py": "",
                           "write/w.py": "def g(p):\n    p.write_text('x')\n"})
    assert file_touches(src) == {"specpair.analyse.x:write_text"}
