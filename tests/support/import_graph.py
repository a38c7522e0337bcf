"""The import graph of src/specpair as Python would execute it, read with `ast`.

Every `import` counts, including those placed inside functions (they run the first time the
function does, so a cycle through one is still a cycle). Importing `a.b.c` also runs
`a/__init__` and `a/b/__init__` first, so those are edges too, except for the importer's
own packages: Python has them in sys.modules, partly run, before any of their modules
runs, and a package's `__init__` that imports its own modules is how packages work.

Not counted: imports under `if TYPE_CHECKING:`, which never run (annotations only; mypy
reads them, and `from __future__ import annotations` keeps them unevaluated).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import paths

SRC = paths.REPO / "src"


def modules(src: Path = SRC) -> dict[str, Path]:
    found = {}
    for path in sorted((src / "specpair").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _with_parents(name: str, known: dict[str, Path]) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(known)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:`."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            for stmt in node.body:
                skipped |= {id(n) for n in ast.walk(stmt)}
    return skipped


def imports(name: str, path: Path, known: dict[str, Path],
            annotations: bool = False) -> set[str]:
    """The specpair modules that running `name` imports (parents included); with
    `annotations`, those under `if TYPE_CHECKING:` too (the layer contract counts them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    skipped = set() if annotations else _type_checking_only(tree)
    explicit: set[str] = set()  # the modules an import statement names
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            explicit |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                explicit.add(submodule if submodule in known else module)
    explicit &= set(known)
    implicit: set[str] = set()  # the packages Python runs first
    for target in explicit:
        implicit |= _with_parents(target, known)
    found = explicit | (implicit - _with_parents(name, known))
    found.discard(name)
    return found


def graph(src: Path = SRC, annotations: bool = False) -> dict[str, set[str]]:
    known = modules(src)
    return {name: imports(name, path, known, annotations) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


if __name__ == "__main__":
    for component in cycles(graph()):
        print(len(component), " ".join(component))
