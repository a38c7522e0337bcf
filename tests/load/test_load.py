"""Loading YAML and Jsonnet: positions, hostile structure, confinement of imports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specpair.load.document import MAX_FILE_BYTES, load_document
from specpair.model.errors import SpecpairError
from tests.support import proc
from tests.support.paths import write


def test_positions_of_keys_and_values(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", "pair:\n  name: x\nlist:\n  - 1\n  - {k: v}\n")
    doc = load_document(path)
    assert doc.data == {"pair": {"name": "x"}, "list": [1, {"k": "v"}]}
    assert doc.locate(("pair", "name")) == (2, 9)
    assert doc.locate(("pair", "name"), key=True) == (2, 3)
    assert doc.locate(("list", 1, "k")) == (5, 9)
    # a missing field is located at its deepest existing parent
    assert doc.locate(("pair", "title")) == (2, 3)


def test_duplicate_keys_are_reported_with_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", "a: 1\nb: 2\na: 3\n")
    with pytest.raises(SpecpairError) as info:
        load_document(path)
    (problem,) = info.value.problems
    assert problem.location.line == 3
    assert "duplicate key 'a'" in problem.message and "line 1" in problem.message


def test_syntax_error_has_position(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", "a:\n  b: [1, 2\nc: 3\n")
    with pytest.raises(SpecpairError) as info:
        load_document(path)
    assert info.value.problems[0].location.line >= 2
    assert "not valid YAML" in info.value.problems[0].message


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    path = write(tmp_path / "bomb.yaml", "\n".join(lines) + "\n")
    with pytest.raises(SpecpairError) as info:
        load_document(path)
    assert "alias" in info.value.problems[0].hint


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "rec.yaml", "a: &a\n  - *a\n")
    with pytest.raises(SpecpairError) as info:
        load_document(path)
    assert "nests deeper" in info.value.problems[0].message


def test_invalid_utf8_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(SpecpairError) as info:
        load_document(path)
    problem = info.value.problems[0]
    assert (problem.location.line, problem.location.column) == (2, 7)
    assert "UTF-8" in problem.message


def test_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_bytes(b"a: " + b"x" * (MAX_FILE_BYTES + 1) + b"\n")
    with pytest.raises(SpecpairError) as info:
        load_document(path)
    assert "limit" in info.value.problems[0].message


def test_several_documents_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecpairError, match="2 YAML documents"):
        load_document(write(tmp_path / "two.yaml", "a: 1\n---\nb: 2\n"))


def test_dates_stay_text(tmp_path: Path) -> None:
    doc = load_document(write(tmp_path / "d.yaml", "when: 2026-01-02\n"))
    assert doc.data == {"when": "2026-01-02"}


def test_jsonnet_imports_inside_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "runbooks"
    write(root / "lib" / "base.libsonnet", "{ a: 1 }")
    path = write(root / "p" / "runbook.jsonnet", "(import '../lib/base.libsonnet') + { b: 2 }")
    assert load_document(path, root).data == {"a": 1, "b": 2}


@pytest.mark.parametrize("expression", [
    "importstr '/etc/passwd'",
    "import '../../outside.libsonnet'",
])
def test_jsonnet_cannot_read_outside_the_tree(tmp_path: Path, expression: str) -> None:
    root = tmp_path / "runbooks"
    write(tmp_path / "outside.libsonnet", "{ secret: 1 }")
    path = write(root / "p" / "runbook.jsonnet", f"{{ a: {expression} }}")
    with pytest.raises(SpecpairError) as info:
        load_document(path, root)
    assert "leaves the runbooks tree" in info.value.problems[0].message


def test_jsonnet_unbounded_recursion_is_stopped(tmp_path: Path) -> None:
    root = tmp_path / "runbooks"
    path = write(root / "p" / "runbook.jsonnet", "local f(n) = f(n + 1) + 1; { a: f(0) }")
    with pytest.raises(SpecpairError) as info:
        load_document(path, root)
    assert "Jsonnet evaluation failed" in info.value.problems[0].message
    assert info.value.problems[0].location.line == 1


def test_jsonnet_error_points_into_the_file(tmp_path: Path) -> None:
    root = tmp_path / "runbooks"
    path = write(root / "p" / "runbook.jsonnet", "{\n  a: 1,\n  b: error 'boom',\n}\n")
    with pytest.raises(SpecpairError) as info:
        load_document(path, root)
    problem = info.value.problems[0]
    assert problem.location.line == 3
    assert "boom" in problem.message


def test_jsonnet_endless_evaluation_is_stopped(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import specpair.load.document as load

    monkeypatch.setattr(load, "JSONNET_TIMEOUT_S", 1.0)
    root = tmp_path / "runbooks"
    # shallow but long: ~15 s of work, stopped by the time limit, not the stack limit
    path = write(root / "p" / "runbook.jsonnet",
                 "{ a: std.foldl(function(acc, x) acc + x, std.range(1, 3000000), 0) }")
    with pytest.raises(SpecpairError) as info:
        load_document(path, root)
    assert "did not finish within 1 s" in info.value.problems[0].message


def test_jsonnet_memory_bomb_is_stopped(tmp_path: Path) -> None:
    root = tmp_path / "runbooks"
    path = write(root / "p" / "runbook.jsonnet",
                 "local s = std.repeat('x', 1 << 28); { a: std.length(s + s + s + s + s + s) }")
    with pytest.raises(SpecpairError) as info:
        load_document(path, root)
    message = info.value.problems[0].message
    assert "MiB" in message or "killed" in message or "did not finish" in message, message


def test_jsonnet_memory_bomb_aborts_quietly(tmp_path: Path) -> None:
    """The evaluator's expected abort in its child prints no crash report, even with
    faulthandler writing to its own copy of stderr (as pytest sets it up)."""
    root = tmp_path / "runbooks"
    path = write(root / "p" / "runbook.jsonnet",
                 "local s = std.repeat('x', 1 << 28); { a: std.length(s + s + s + s + s + s) }")
    script = ("import faulthandler, os, sys\n"
              "faulthandler.enable(file=os.fdopen(os.dup(2), 'w'))\n"
              "from pathlib import Path; from specpair.load.document import load_document\n"
              "from specpair.model.errors import SpecpairError\n"
              "try:\n    load_document(Path(sys.argv[1]), Path(sys.argv[2]))\n"
              "except SpecpairError as error:\n    print(error.problems[0].message)\n")
    result = proc.run([sys.executable, "-c", script, str(path), str(root)],
                            capture_output=True, text=True, check=False, cpu_s=120)
    assert result.returncode == 0, result.stderr
    assert "Jsonnet evaluation" in result.stdout, result.stdout
    assert "Fatal Python error" not in result.stderr, result.stderr
    assert result.stderr == "", result.stderr
