"""Editing a runbook in place: change only the fields a plan chose, keep every other byte.

One mechanism for both formats: small text splices (replace a value's span, or insert an
entry into the innermost mapping/object of the file that holds the field's parent), then
verification by loading the edited text again. An edit is applied only when the edited
document evaluates to exactly the original document with the changes made (deep
equality of the plain data: nothing else moved) and still validates as a Runbook with
no rule findings. Anything else is refused with reasons and a suggested patch (a diff)
that a person can apply by hand; the file on disk is never touched by `plan_edit`.

YAML positions come from PyYAML's pure-Python composer, whose marks are character
offsets into the text (libyaml's are not documented as such; `specpair.load.edit_yaml`);
the verification loads with the same composer as `specpair.load.document`. Jsonnet has no
parser in Python, so a small lexer finds object literals and field definitions in the
runbook's own text (`specpair.load.edit_jsonnet`); imported libraries are never edited (a
field they define is overridden in the runbook instead). This module plans and verifies
and reads only; `specpair.write.runbook_edit` writes a verified edit.
"""
from __future__ import annotations

import copy
import difflib
import enum
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from specpair.load import rules
from specpair.load.document import _compose_yaml, _evaluate_jsonnet, read_text, render_path
from specpair.load.edit_jsonnet import jsonnet_draft, jsonnet_override_hint
from specpair.load.edit_splices import Scalar, apply_splices, dotted
from specpair.load.edit_yaml import yaml_draft
from specpair.load.runbooks import load_runbook, runbooks_root
from specpair.model.errors import SpecpairError
from specpair.model.findings import path_key
from specpair.model.runbook import Runbook


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
    fields = [(change.path, change.value) for change in changes]
    draft = (yaml_draft(text, fields, newline) if kind == "yaml"
             else jsonnet_draft(text, fields, newline))
    if draft.refusals:
        return EditResult(path, False, None, "", draft.refusals, digest)
    new_text = apply_splices(text, draft.splices)
    diff = unified_diff(text, new_text, display)
    reasons = list(draft.manual) or _verify(path, kind, new_text, expected, changes)
    if reasons:
        if kind == "jsonnet":
            reasons.append("the changes as a Jsonnet override of this runbook's fields: "
                           + jsonnet_override_hint(fields))
        return EditResult(path, False, None, diff, reasons, digest)
    return EditResult(path, True, new_text, diff, [], digest)


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
        shown = dotted(change.path)
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
                    display, f"{shown} and {dotted(other)} are both changed",
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
        shown = dotted(path[:i + 1])
        if info is None:
            allowed = sorted(model.model_fields)
            close = difflib.get_close_matches(part, allowed, n=1)
            hint = f"did you mean `{close[0]}`?" if close else "allowed: " + ", ".join(allowed)
            where = f"{dotted(path[:i])} has" if i else "a runbook has"
            raise SpecpairError.single(
                display, f"unknown field {dotted(path)!r}: {where} no field {part!r}", hint,
                field_path=dotted(path))
        if i == len(path) - 1:
            return None
        if _holds_list(info.annotation):
            return (f"{dotted(path)}: {shown} is a list; changing keys inside lists is not "
                    "done in place, edit the entry by hand")
        sub = _model_in(info.annotation)
        if sub is None:
            raise SpecpairError.single(
                display, f"unknown field {dotted(path)!r}: {shown} is a single value with no "
                f"field {path[i + 1]!r}", f"set {shown} itself", field_path=dotted(path))
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
                shown = dotted(change.path[:i + 1])
                refusals.append(f"{dotted(change.path)}: {shown} is {child!r} in the runbook, "
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
        shown = dotted(loc)
        if any(loc[:len(p)] == p or p[:len(loc)] == loc for p in changed):
            reasons.append(
                f"{shown}: the edited runbook evaluates to {_show(got)}, not {_show(want)}: a "
                "definition evaluated after the runbook's own (an imported library, or a later "
                "field) decides it, or the runbook computes it")
        else:
            reasons.append(
                f"{shown}: the edit also changes this field ({_show(want)} -> {_show(got)}), "
                "which the plan did not ask for: it is computed from "
                + ", ".join(dotted(p) for p in changed) + "; change the fields by hand")
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


