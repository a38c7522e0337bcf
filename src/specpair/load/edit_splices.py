"""The text edits a runbook edit is made of: splices (replace a span of the file's text, or
insert at an offset) and the tree of new fields an insertion adds. Shared by the YAML and
Jsonnet editors (`specpair.load.edit_yaml`, `specpair.load.edit_jsonnet`); what they
edit is planned and verified by `specpair.load.runbook_edit`."""

from __future__ import annotations

from dataclasses import dataclass, field

Scalar = str | int | float | bool
FieldValue = tuple[tuple[str, ...], Scalar]
"""One change as the text editors take it: the field's path and its new value."""


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


@dataclass(frozen=True)
class Splice:
    start: int
    end: int
    text: str
    order: int = 0
    """Among insertions at the same offset, the lower goes first (the deeper mapping)."""


@dataclass
class Draft:
    splices: list[Splice] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """Changes that cannot be made in place at all."""
    manual: list[str] = field(default_factory=list)
    """Changes made in the suggested patch but never applied automatically."""


def apply_splices(text: str, splices: list[Splice]) -> str:
    out = []
    cursor = 0
    for splice in sorted(splices, key=lambda s: (s.start, s.end, s.order)):
        if splice.start < cursor:  # two changes in one span: a bug, not user input
            raise AssertionError(f"overlapping edits at offset {splice.start}")
        out.append(text[cursor:splice.start])
        out.append(splice.text)
        cursor = splice.end
    out.append(text[cursor:])
    return "".join(out)


Tree = dict[str, "Scalar | Tree"]


def put(tree: Tree, path: tuple[str, ...], value: Scalar) -> None:
    for part in path[:-1]:
        child = tree.setdefault(part, {})
        assert isinstance(child, dict)  # prefixes of changes were refused up front
        tree = child
    tree[path[-1]] = value

