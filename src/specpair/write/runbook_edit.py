"""Editing a runbook in place: change only the fields a plan chose, keep every other byte.

One mechanism for both formats: small text splices (replace a value's span, or insert an
entry into the innermost mapping/object of the file that holds the field's parent), then
verification by loading the edited text again. An edit is applied only when the edited
document evaluates to exactly the original document with the changes made (deep
equality of the plain data: nothing else moved) and still validates as a Runbook with
no rule findings. Anything else is refused with reasons and a suggested patch (a diff)
that a person can apply by hand; the file on disk is never touched by `plan_edit`.

YAML positions come from PyYAML's pure-Python composer, whose marks are character
offsets into the text (libyaml's are not documented as such); the verification loads
with the same composer as `specpair.load.document`. Jsonnet has no parser in Python, so a small
lexer finds object literals and field definitions in the runbook's own text; imported
libraries are never edited (a field they define is overridden in the runbook instead).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import enum
import hashlib
import json
import math
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ValidationError

from specpair.load import rules
from specpair.load.document import _compose_yaml, _evaluate_jsonnet, read_text, render_path
from specpair.load.runbooks import load_runbook, runbooks_root
from specpair.model.errors import SpecpairError
from specpair.model.findings import path_key
from specpair.model.runbook import Runbook

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Change:
    """Set one field of the runbook to a JSON scalar."""

    path: tuple[str, ...]
    """e.g. ("deployment", "parallel", "tensor")"""
    value: Scalar


@dataclass(frozen=True)
class EditResult:
    path: Path
    """The runbook file."""
    applied: bool
    """True when new_text is verified and may be written."""
    new_text: str | None
    """The whole edited file; None when the edit could not be applied safely."""
    diff: str
    """Unified diff (a/<display> b/<display>) of the edit, or of the suggested manual patch."""
    reasons: list[str]
    """Why a change could not be applied in place; empty when applied."""
    base_sha256: str = ""
    """Digest of the text the edit was planned on: `write_edit` refuses to overwrite a file
    that changed in between (someone edited it after the plan was made)."""


def plan_edit(path: Path, display: str, changes: list[Change]) -> EditResult:
    """Work out the edit of `path` that makes `changes`, and verify it; nothing is written.

    Raises SpecpairError when the runbook does not load, or a change names a field the
    Runbook schema does not have (or gives no usable value)."""
    kind = _kind(path, display)
    changes = [_plain(change) for change in changes]
    refused = _check_changes(changes, display)
    text = read_text(path)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if refused:
        return EditResult(path, False, None, "", refused, digest)
    original = load_runbook(path, display).document.data
    newline = "\r\n" if "\r\n" in text else "\n"
    expected, refusals = _expected_data(original, changes)
    if refusals:
        return EditResult(path, False, None, "", refusals, digest)
    draft = (_yaml_draft(text, changes, newline) if kind == "yaml"
             else _jsonnet_draft(text, changes, newline))
    if draft.refusals:
        return EditResult(path, False, None, "", draft.refusals, digest)
    new_text = _apply_splices(text, draft.splices)
    diff = unified_diff(text, new_text, display)
    reasons = list(draft.manual) or _verify(path, kind, new_text, expected, changes)
    if reasons:
        if kind == "jsonnet":
            reasons.append("the changes as a Jsonnet override of this runbook's fields: "
                           + _jsonnet_override_hint(changes))
        return EditResult(path, False, None, diff, reasons, digest)
    return EditResult(path, True, new_text, diff, [], digest)


def write_edit(result: EditResult) -> None:
    """Write a verified edit atomically: a temporary file in the same folder, then
    os.replace, so a reader sees the old file or the new one, never half of one."""
    if not result.applied or result.new_text is None:
        raise SpecpairError.single(
            result.path, "the edit was not applied: " + "; ".join(result.reasons),
            "apply the suggested patch by hand, then run `specpair check`")
    target = result.path.resolve()  # through a symlink: replace the file, not the link
    current = target.read_bytes()
    if result.base_sha256 and hashlib.sha256(current).hexdigest() != result.base_sha256:
        raise SpecpairError.single(
            result.path, "the file changed after the edit was planned",
            "run the plan again so the edit is made on the current text")
    mode = stat.S_IMODE(os.stat(target).st_mode)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(result.new_text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def unified_diff(old: str, new: str, display: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{display}", tofile=f"b/{display}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# --------------------------------------------------------------------------- checks


def _kind(path: Path, display: str) -> Literal["yaml", "jsonnet"]:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".jsonnet":
        return "jsonnet"
    raise SpecpairError.single(display, f"cannot edit a {suffix!r} file in place",
                               "runbooks are .yaml, .yml or .jsonnet files")


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def _plain(change: Change) -> Change:
    """The change with a plain Python value: an enum member (KVDtype.FP8_E4M3, as the plan
    may hold it) becomes its value, so that it is written, and compared, as text."""
    value: Any = change.value
    if isinstance(value, enum.Enum):
        value = value.value
    for kind in (bool, int, float, str):  # bool first: it is an int too
        if isinstance(value, kind):
            value = kind(value)
            break
    return Change(tuple(change.path), value)


def _check_changes(changes: list[Change], display: str) -> list[str]:
    """Raise on a field the schema lacks or an unusable value; return refusals for the
    fields that exist but cannot be edited in place (keys inside lists)."""
    refused: list[str] = []
    seen: dict[tuple[str, ...], Change] = {}
    for change in changes:
        shown = _dotted(change.path)
        if not change.path:
            raise SpecpairError.single(display, "a change names no field",
                                       "give a dotted field path such as deployment.gpu")
        value = change.value
        if value is None or not isinstance(value, (str, int, float, bool)):
            raise SpecpairError.single(
                display, f"{shown}: {type(value).__name__} is not a single value",
                "a plan sets a field to a string, number or boolean", field_path=shown)
        if isinstance(value, float) and not math.isfinite(value):
            raise SpecpairError.single(display, f"{shown}: {value} is not a finite number",
                                       "write a finite number", field_path=shown)
        for other in seen:
            if other == change.path or change.path[:len(other)] == other \
                    or other[:len(change.path)] == change.path:
                raise SpecpairError.single(
                    display, f"{shown} and {_dotted(other)} are both changed",
                    "change each field once, and not a field together with its parent",
                    field_path=shown)
        seen[change.path] = change
        list_reason = _schema_path(change.path, display)
        if list_reason:
            refused.append(list_reason)
    return refused


def _schema_path(path: tuple[str, ...], display: str) -> str | None:
    """Raise when the Runbook schema has no such field; a reason when it is inside a list."""
    model: type[BaseModel] = Runbook
    for i, part in enumerate(path):
        info = model.model_fields.get(part)
        shown = _dotted(path[:i + 1])
        if info is None:
            allowed = sorted(model.model_fields)
            close = difflib.get_close_matches(part, allowed, n=1)
            hint = f"did you mean `{close[0]}`?" if close else "allowed: " + ", ".join(allowed)
            where = f"{_dotted(path[:i])} has" if i else "a runbook has"
            raise SpecpairError.single(
                display, f"unknown field {_dotted(path)!r}: {where} no field {part!r}", hint,
                field_path=_dotted(path))
        if i == len(path) - 1:
            return None
        if _holds_list(info.annotation):
            return (f"{_dotted(path)}: {shown} is a list; changing keys inside lists is not "
                    "done in place, edit the entry by hand")
        sub = _model_in(info.annotation)
        if sub is None:
            raise SpecpairError.single(
                display, f"unknown field {_dotted(path)!r}: {shown} is a single value with no "
                f"field {path[i + 1]!r}", f"set {shown} itself", field_path=_dotted(path))
        model = sub
    return None


def _holds_list(annotation: Any) -> bool:
    import typing

    if typing.get_origin(annotation) is list:
        return True
    return any(_holds_list(arg) for arg in typing.get_args(annotation))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found:
            return found
    return None


def _expected_data(original: Any, changes: list[Change]) -> tuple[Any, list[str]]:
    """The original plain data with the changes made: what the edit must evaluate to."""
    expected = copy.deepcopy(original)
    refusals = []
    for change in changes:
        node = expected
        for i, part in enumerate(change.path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                shown = _dotted(change.path[:i + 1])
                refusals.append(f"{_dotted(change.path)}: {shown} is {child!r} in the runbook, "
                                "not a mapping; set the fields by hand")
                break
            node = child
        else:
            node[change.path[-1]] = change.value
    return expected, refusals


# --------------------------------------------------------------------------- verification

_ABSENT = object()


def _verify(path: Path, kind: str, new_text: str, expected: Any,
            changes: list[Change]) -> list[str]:
    try:
        if kind == "yaml":
            data = _compose_yaml(path, new_text).data
        else:
            data = _evaluate_jsonnet_text(path, new_text)
    except SpecpairError as exc:
        return ["the edited runbook does not load: "
                + "; ".join(p.message for p in exc.problems)]
    except OSError as exc:
        return [f"the edit could not be verified: {exc.strerror} ({exc.filename})"]
    reasons = []
    changed = [c.path for c in changes]
    for loc, got, want in _differences(data, expected, ())[:8]:
        shown = _dotted(loc)
        if any(loc[:len(p)] == p or p[:len(loc)] == loc for p in changed):
            reasons.append(
                f"{shown}: the edited runbook evaluates to {_show(got)}, not {_show(want)}: a "
                "definition evaluated after the runbook's own (an imported library, or a later "
                "field) decides it, or the runbook computes it")
        else:
            reasons.append(
                f"{shown}: the edit also changes this field ({_show(want)} -> {_show(got)}), "
                "which the plan did not ask for: it is computed from "
                + ", ".join(_dotted(p) for p in changed) + "; change the fields by hand")
    if reasons:
        return reasons
    try:
        runbook = Runbook.model_validate(data)
    except ValidationError as exc:
        return [f"{render_path(tuple(e['loc']))}: {e['msg']}"
                for e in exc.errors(include_url=False)]
    folder = path.parent.name if path.parent.parent.name == "runbooks" else None
    return [f"{render_path(path_key(f.field))}: {f.message} ({f.hint})"
            for f in rules.check_runbook(runbook, folder_name=folder)]


def _show(value: Any) -> str:
    return "nothing (the field is absent)" if value is _ABSENT else repr(value)


def _same(a: Any, b: Any) -> bool:
    """Equality of plain data that tells true from 1 (Python's == does not); numbers
    compare by value, since Jsonnet prints 2.0 as 2."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _differences(got: Any, want: Any, loc: tuple[str, ...]) -> list[tuple[tuple[str, ...],
                                                                           Any, Any]]:
    if isinstance(got, dict) and isinstance(want, dict):
        found = []
        for key in [*want, *(k for k in got if k not in want)]:
            found.extend(_differences(got.get(key, _ABSENT), want.get(key, _ABSENT),
                                      (*loc, str(key))))
        return found
    if got is _ABSENT or want is _ABSENT or not _same(got, want):
        return [(loc, got, want)]
    return []


def _evaluate_jsonnet_text(path: Path, text: str) -> Any:
    """Evaluate edited Jsonnet with load.py's confinement and limits, under the runbook's
    own name so that its relative imports resolve the same way."""
    return _evaluate_jsonnet(path, runbooks_root(path), text)


# --------------------------------------------------------------------------- splices


@dataclass(frozen=True)
class _Splice:
    start: int
    end: int
    text: str
    order: int = 0
    """Among insertions at the same offset, the lower goes first (the deeper mapping)."""


@dataclass
class _Draft:
    splices: list[_Splice] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """Changes that cannot be made in place at all."""
    manual: list[str] = field(default_factory=list)
    """Changes made in the suggested patch but never applied automatically."""


def _apply_splices(text: str, splices: list[_Splice]) -> str:
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


def _put(tree: Tree, path: tuple[str, ...], value: Scalar) -> None:
    for part in path[:-1]:
        child = tree.setdefault(part, {})
        assert isinstance(child, dict)  # prefixes of changes were refused up front
        tree = child
    tree[path[-1]] = value


# --------------------------------------------------------------------------- YAML


def yaml_scalar(value: Scalar, style: str | None = None) -> str:
    """`value` as a YAML scalar that reads back as the same type: plain when the resolver
    keeps it a string (H200-141GB), quoted when it would not ("yes", "1e3", "on"). A string
    replacing a quoted one keeps that quote style."""
    quoted: str | None = None
    if isinstance(value, str):
        plain_text = value.isprintable()  # no line breaks, no control characters
        if style == '"' or not plain_text:
            quoted = '"'  # escapes are possible only in double quotes
        elif style == "'":
            return "'" + value.replace("'", "''") + "'"
    # the emitter's own decision (and escapes), in flow context, stricter than block context
    out = yaml.safe_dump([value], default_flow_style=True, default_style=quoted,
                         allow_unicode=True, width=1 << 30)
    return out.strip()[1:-1]


def _yaml_flow(tree: Tree) -> str:
    return "{" + ", ".join(f"{yaml_scalar(k)}: {_yaml_value(v)}" for k, v in tree.items()) + "}"


def _yaml_value(value: Scalar | Tree) -> str:
    return _yaml_flow(value) if isinstance(value, dict) else yaml_scalar(value)


def _yaml_entry(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return key_node, value_node
    return None


def _yaml_is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _yaml_draft(text: str, changes: list[Change], newline: str) -> _Draft:
    draft = _Draft()
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None:  # an empty file never loads as a runbook; kept for the type checker
        draft.refusals.append("the file holds no YAML document")
        return draft
    inserts: dict[int, tuple[yaml.Node, int, Tree]] = {}
    for change in changes:
        node: yaml.Node = root
        shown = _dotted(change.path)
        for i, key in enumerate(change.path):
            where = _dotted(change.path[:i])
            if i and _yaml_is_null(node):  # `parallel:` with no value: fill it in
                _put(inserts.setdefault(id(node), (node, i, {}))[2], change.path[i:],
                     change.value)
                break
            if not isinstance(node, yaml.MappingNode):
                draft.refusals.append(f"{shown}: {where} is not a mapping in the file; "
                                      "edit it by hand")
                break
            entry = _yaml_entry(node, key)
            if entry is None:
                _put(inserts.setdefault(id(node), (node, i, {}))[2], change.path[i:],
                     change.value)
                break
            key_node, value_node = entry
            here = _dotted(change.path[:i + 1])
            if value_node.start_mark.index < key_node.end_mark.index:
                draft.refusals.append(f"{shown}: {here} is an alias (*name) of a value "
                                      "defined elsewhere; edit it by hand")
                break
            if text.startswith("&", value_node.start_mark.index):
                draft.refusals.append(f"{shown}: {here} carries an anchor (&name) that "
                                      "aliases share; edit it by hand")
                break
            if i == len(change.path) - 1:
                if not isinstance(value_node, yaml.ScalarNode):
                    draft.refusals.append(f"{shown}: the file holds a mapping or list here; "
                                          "replacing it with one value is not done in place")
                else:
                    draft.splices.append(_yaml_replace(text, value_node, change.value))
                break
            node = value_node
    for node, depth, tree in inserts.values():
        draft.splices.append(_yaml_insert(text, node, depth, tree, newline))
    return draft


def _yaml_replace(text: str, node: yaml.ScalarNode, value: Scalar) -> _Splice:
    start, end = node.start_mark.index, node.end_mark.index
    style = node.style
    if style in ("|", ">"):  # the span runs to the next line; keep the line breaks
        end = start + len(text[start:end].rstrip())
        style = None
    rendered = yaml_scalar(value, style)
    if start == end:  # `key:` with no value: the mark sits right after the colon
        rendered = " " + rendered
    return _Splice(start, end, rendered)


def _yaml_insert(text: str, node: yaml.Node, depth: int, tree: Tree, newline: str) -> _Splice:
    if _yaml_is_null(node):
        start, end = node.start_mark.index, node.end_mark.index
        return _Splice(start, end, (" " if start == end else "") + _yaml_flow(tree), -depth)
    assert isinstance(node, yaml.MappingNode)
    if node.flow_style:
        if node.value:
            at = node.value[-1][1].end_mark.index
            return _Splice(at, at, ", " + _yaml_flow(tree)[1:-1], -depth)
        at = text.rindex("}", node.start_mark.index, node.end_mark.index)
        return _Splice(at, at, _yaml_flow(tree)[1:-1], -depth)
    indent = " " * node.value[0][0].start_mark.column
    at = _yaml_block_end(text, node)
    lines = [f"{indent}{yaml_scalar(k)}: {_yaml_value(v)}" for k, v in tree.items()]
    if at == len(text) and not text.endswith("\n"):  # keep the file's missing final newline
        return _Splice(at, at, "".join(newline + line for line in lines), -depth)
    return _Splice(at, at, "".join(line + newline for line in lines), -depth)


def _yaml_block_end(text: str, node: yaml.MappingNode) -> int:
    """Where a new entry of a block mapping goes: the start of the line after its last
    content (after a trailing comment on that line; before blank or comment lines that
    follow, which belong to what comes next), or the end of a file without a final
    line break."""
    leaf: yaml.Node = node
    while isinstance(leaf, (yaml.MappingNode, yaml.SequenceNode)) and not leaf.flow_style \
            and leaf.value:
        last = leaf.value[-1]
        leaf = last[1] if isinstance(leaf, yaml.MappingNode) else last
    start, end = leaf.start_mark.index, leaf.end_mark.index
    if isinstance(leaf, yaml.ScalarNode) and leaf.style in ("|", ">"):
        header = text[start:text.find("\n", start)].split("#")[0]
        if "+" in header:  # keep chomping: the trailing blank lines are the value's
            return end
        end = start + len(text[start:end].rstrip())
    line_end = text.find("\n", end)
    return len(text) if line_end == -1 else line_end + 1


# --------------------------------------------------------------------------- Jsonnet


@dataclass(frozen=True)
class _Token:
    kind: str  # "id", "str", "num", "punct"
    start: int
    end: int
    text: str


class _LexError(Exception):
    pass


_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JSONNET_KEYWORDS = frozenset((
    "assert", "else", "error", "false", "for", "function", "if", "import", "importstr",
    "importbin", "in", "local", "null", "tailstrict", "then", "self", "super", "true"))


def _jsonnet_tokens(text: str) -> list[_Token]:
    """Tokens of Jsonnet source with offsets; comments and whitespace dropped. Enough to
    find brackets, fields and literals; operators come out one character each."""
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c == "#" or text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j == -1 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j == -1:
                raise _LexError("an unterminated /* comment")
            i = j + 2
        elif text.startswith("|||", i):
            j = text.find("|||", i + 3)
            if j == -1:
                raise _LexError("an unterminated ||| text block")
            tokens.append(_Token("block", i, j + 3, text[i:j + 3]))
            i = j + 3
        elif c in "'\"" or (c == "@" and text[i + 1:i + 2] in ("'", '"')):
            verbatim = c == "@"
            quote = text[i + 1] if verbatim else c
            j = i + (2 if verbatim else 1)
            while j < n:
                if text[j] == quote:
                    if verbatim and text[j + 1:j + 2] == quote:
                        j += 2
                        continue
                    break
                j += 2 if text[j] == "\\" and not verbatim else 1
            if j >= n:
                raise _LexError(f"an unterminated string at offset {i}")
            tokens.append(_Token("verbatim" if verbatim else "str", i, j + 1, text[i:j + 1]))
            i = j + 1
        elif c.isdigit():
            match = _NUMBER.match(text, i)
            assert match is not None
            tokens.append(_Token("num", i, match.end(), match.group()))
            i = match.end()
        elif c.isalpha() or c == "_":
            match = _IDENT.match(text, i)
            assert match is not None
            tokens.append(_Token("id", i, match.end(), match.group()))
            i = match.end()
        else:
            tokens.append(_Token("punct", i, i + 1, c))
            i += 1
    return tokens


def _jsonnet_brackets(tokens: list[_Token]) -> dict[int, int]:
    pairs = {"}": "{", "]": "[", ")": "("}
    stack: list[int] = []
    match: dict[int, int] = {}
    for index, token in enumerate(tokens):
        if token.kind != "punct":
            continue
        if token.text in "{[(":
            stack.append(index)
        elif token.text in pairs:
            if not stack or tokens[stack[-1]].text != pairs[token.text]:
                raise _LexError(f"an unbalanced {token.text!r} at offset {token.start}")
            match[stack.pop()] = index
    if stack:
        raise _LexError(f"an unclosed {tokens[stack[-1]].text!r}")
    return match


@dataclass(frozen=True)
class _Field:
    name: str
    value: tuple[int, int]
    """Token indices [first, last + 1) of the field's value expression."""


class _JsonnetText:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _jsonnet_tokens(text)
        self.match = _jsonnet_brackets(self.tokens)

    def is_punct(self, index: int, char: str) -> bool:
        token = self.tokens[index]
        return token.kind == "punct" and token.text == char

    def outermost_object(self) -> int | None:
        """The object literal the file ends with (`{ ... }` or `base { ... }`)."""
        last = len(self.tokens) - 1
        if last < 0 or not self.is_punct(last, "}"):
            return None
        opener = next(o for o, c in self.match.items() if c == last)
        return opener if not any(o < opener < c for o, c in self.match.items()) else None

    def top_level(self, first: int, end: int) -> list[int]:
        """Token indices in [first, end) outside any bracket pair that opens there."""
        found = []
        index = first
        while index < end:
            found.append(index)
            index = self.match[index] + 1 if index in self.match else index + 1
        return found

    def members(self, opener: int) -> list[tuple[int, int]]:
        closer = self.match[opener]
        found = []
        start = opener + 1
        for index in self.top_level(opener + 1, closer):
            if self.is_punct(index, ","):
                found.append((start, index))
                start = index + 1
        if start < closer:
            found.append((start, closer))
        return found

    def fields(self, opener: int) -> list[_Field]:
        found = []
        for first, end in self.members(opener):
            name = self._field_name(first)
            index = first + 1
            if name is None or index >= end:
                continue
            if self.is_punct(index, "+"):
                index += 1
            colons = 0
            while index < end and self.is_punct(index, ":"):
                colons += 1
                index += 1
            if not 1 <= colons <= 3 or index >= end:
                continue
            if any(self.tokens[i].text == "for" for i in self.top_level(index, end)):
                continue  # an object comprehension, not a field
            found.append(_Field(name, (index, end)))
        return found

    def _field_name(self, index: int) -> str | None:
        token = self.tokens[index]
        if token.kind == "id" and token.text not in _JSONNET_KEYWORDS:
            return token.text
        if token.kind == "str" and "\\" not in token.text:
            return token.text[1:-1]
        return None

    def find(self, opener: int, name: str) -> _Field | None:
        return next((f for f in self.fields(opener) if f.name == name), None)

    def span(self, first: int, end: int) -> tuple[int, int]:
        return self.tokens[first].start, self.tokens[end - 1].end

    def literal(self, first: int, end: int) -> bool:
        tokens = self.tokens[first:end]
        if len(tokens) == 2 and tokens[0].text == "-" and tokens[1].kind == "num":
            return True
        return len(tokens) == 1 and (tokens[0].kind in ("num", "str") or (
            tokens[0].kind == "id" and tokens[0].text in ("true", "false")))

    def object_of(self, first: int, end: int) -> int | None:
        """The object literal a field's value ends in, when inserting into it adds to the
        value: `{ ... }`, `base.x { ... }` or `base.x + { ... }`."""
        last = end - 1
        if not self.is_punct(last, "}"):
            return None
        opener = next(o for o, c in self.match.items() if c == last)
        head = self.tokens[first:opener]
        names = all(t.text in (".", "+") if t.kind == "punct" else (
            t.kind == "id" and t.text not in _JSONNET_KEYWORDS - {"self", "super"})
            for t in head)
        if names and (not head or head[-1].text != "."):
            return opener
        return None


def jsonnet_scalar(value: Scalar, quote: str = "'") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    body = json.dumps(value, ensure_ascii=False)
    if quote == '"' or ("'" in value and '"' not in value):
        return body
    return "'" + body[1:-1].replace("'", "\\'") + "'"


def _jsonnet_key(name: str) -> str:
    return name if _IDENT.fullmatch(name) and name not in _JSONNET_KEYWORDS \
        else jsonnet_scalar(name)


def _jsonnet_members(tree: Tree) -> list[str]:
    """New fields as Jsonnet; objects merge (`+:`) with what the runbook inherits, so a
    library's other fields in that object stay."""
    out = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out.append(f"{_jsonnet_key(key)}+: {{ " + ", ".join(_jsonnet_members(value)) + " }")
        else:
            out.append(f"{_jsonnet_key(key)}: {jsonnet_scalar(value)}")
    return out


def _jsonnet_override_hint(changes: list[Change]) -> str:
    tree: Tree = {}
    for change in changes:
        _put(tree, change.path, change.value)
    return ", ".join(_jsonnet_members(tree))


def _jsonnet_draft(text: str, changes: list[Change], newline: str) -> _Draft:
    draft = _Draft()
    try:
        source = _JsonnetText(text)
    except _LexError as exc:
        draft.refusals.append(f"cannot read the runbook's Jsonnet text ({exc}); add "
                              f"{_jsonnet_override_hint(changes)} by hand")
        return draft
    outer = source.outermost_object()
    if outer is None:
        draft.refusals.append("the runbook does not end in an object literal ({ ... } or "
                              f"base {{ ... }}); add {_jsonnet_override_hint(changes)} by hand")
        return draft
    inserts: dict[int, tuple[int, Tree]] = {}
    for change in changes:
        shown = _dotted(change.path)
        opener = outer
        for i, key in enumerate(change.path):
            found = source.find(opener, key)
            if found is None:
                _put(inserts.setdefault(opener, (i, {}))[1], change.path[i:], change.value)
                break
            first, end = found.value
            start, stop = source.span(first, end)
            expression = text[start:stop]
            if i == len(change.path) - 1:
                if source.literal(first, end):
                    quote = text[start] if source.tokens[first].kind == "str" else "'"
                    draft.splices.append(_Splice(start, stop, jsonnet_scalar(change.value,
                                                                              quote)))
                else:
                    draft.manual.append(
                        f"{shown}: the runbook sets it with an expression, not a literal "
                        f"({_clip(expression)}); replacing that with a literal would drop what "
                        "it computes, so the suggested patch is for a person to judge")
                    draft.splices.append(_Splice(start, stop, jsonnet_scalar(change.value)))
                break
            inner = source.object_of(first, end)
            if inner is None:
                here = _dotted(change.path[:i + 1])
                draft.manual.append(
                    f"{shown}: {here} is an expression in the runbook ({_clip(expression)}), "
                    "not an object literal to add the field to; the suggested patch merges "
                    "an object onto it")
                tree: Tree = {}
                _put(tree, change.path[i + 1:], change.value)
                members = ", ".join(_jsonnet_members(tree))
                draft.splices.append(_Splice(start, stop, f"({expression}) + {{ {members} }}"))
                break
            opener = inner
    for opener, (depth, tree) in inserts.items():
        draft.splices.extend(_jsonnet_insert(source, opener, tree, newline, -depth))
    return draft


def _clip(expression: str) -> str:
    flat = " ".join(expression.split())
    return flat if len(flat) <= 60 else flat[:57] + "..."


def _jsonnet_insert(source: _JsonnetText, opener: int, tree: Tree, newline: str,
                    order: int) -> list[_Splice]:
    """New fields at the end of an object literal, in its layout: one line each when the
    object spans lines, else `, field: value` before the closing brace."""
    text, tokens = source.text, source.tokens
    closer = source.match[opener]
    members = _jsonnet_members(tree)
    open_end, close_start = tokens[opener].end, tokens[closer].start
    if closer == opener + 1:  # an empty object
        inside = text[open_end:close_start]
        if inside.strip():  # only comments inside: keep them
            return [_Splice(open_end, open_end, " " + ", ".join(members) + ",", order)]
        return [_Splice(open_end, close_start, " " + ", ".join(members) + " ", order)]
    last = tokens[closer - 1]
    comma = last.kind == "punct" and last.text == ","
    line_end = text.find("\n", last.end)
    if "\n" not in text[open_end:close_start] or line_end == -1 or line_end > close_start:
        joined = ", ".join(members)
        if comma:
            return [_Splice(last.end, last.end, f" {joined},", order)]
        return [_Splice(last.end, last.end, f", {joined}", order)]
    if text[line_end - 1] == "\r":
        line_end -= 1
    first_member = source.members(opener)[-1][0]
    line_start = text.rfind("\n", 0, tokens[first_member].start) + 1
    indent = text[line_start:tokens[first_member].start]
    if indent.strip():  # the member does not start its line: indent past the brace's line
        brace_line = text.rfind("\n", 0, close_start) + 1
        indent = re.match(r"[ \t]*", text[brace_line:]).group() + "  "  # type: ignore[union-attr]
    splices = [] if comma else [_Splice(last.end, last.end, ",", order)]
    added = "".join(f"{newline}{indent}{member}," for member in members)
    splices.append(_Splice(line_end, line_end, added, order))
    return splices
