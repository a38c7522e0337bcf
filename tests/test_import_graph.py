"""The import graph of src/specpair has no cycle, counting imports placed inside functions
(issue 26): data flows one way, load → resolve → analyse → generate."""

from __future__ import annotations

from pathlib import Path

from tests.support.import_graph import cycles, graph


def test_src_has_no_import_cycle() -> None:
    found = cycles(graph())  # tests/test_layer_contract.py counts annotation imports too
    assert not found, "import cycles:\n" + "\n".join(" → ".join(c) for c in found)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "specpair" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "from specpair import b\n",
        "b.py": "def f():\n    from specpair.a import x\n    return x\n",
    })
    assert cycles(graph(src)) == [["specpair.a", "specpair.b"]]


def test_a_package_init_run_by_its_module_is_an_edge(tmp_path: Path) -> None:
    # importing specpair.pkg.types runs pkg/__init__, which imports c, which imports
    # pkg.types: the failure a registry in a package's __init__ causes
    src = _tree(tmp_path, {
        "__init__.py": "",
        "pkg/__init__.py": "from specpair import c\n",
        "pkg/types.py": "X = 1\n",
        "c.py": "from specpair.pkg.types import X\n",
    })
    assert cycles(graph(src)) == [["specpair.c", "specpair.pkg"]]


def test_a_package_importing_its_own_modules_is_no_cycle(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "__init__.py": "",
        "pkg/__init__.py": "from specpair.pkg import one\n",
        "pkg/one.py": "from specpair.pkg import two\n",
        "pkg/two.py": "Y = 2\n",
    })
    assert cycles(graph(src)) == []
