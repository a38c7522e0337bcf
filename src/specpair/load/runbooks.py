"""Finding runbooks and locks on disk and turning them into validated models.

All problems of a file are collected in one pass (YAML structure, pydantic types, the
cross-field rules) and reported together, each with file:line:column and the field path.
"""

from __future__ import annotations

import difflib
import json
import os
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from specpair.load import file_policy, rules
from specpair.load.document import (
    MAX_FILE_BYTES,
    Document,
    PathKey,
    bounded_json,
    load_document,
    read_text,
    render_path,
)
from specpair.load.near_values import did_you_mean, listed_values
from specpair.load.record_files import by_start, record_paths
from specpair.model.common import UNSAFE
from specpair.model.errors import Location, Problem, SpecpairError
from specpair.model.findings import path_key
from specpair.model.lock import Lock
from specpair.model.runbook import UNION_TAGS, Runbook

RUNBOOK_NAMES = ("runbook.yaml", "runbook.yml", "runbook.jsonnet")
MEASUREMENTS_DIR = "measurements"
LOCK_NAME = "lock.json"
GENERATED_DIR = "generated"


@dataclass(frozen=True)
class LoadedRunbook:
    runbook: Runbook
    document: Document
    folder: Path

    @property
    def name(self) -> str:
        return self.runbook.pair.name


def discover(paths: list[Path]) -> list[Path]:
    """Runbook files under the given files or folders, in a stable order. A folder is
    searched under the file policy: a link anywhere in it is an error naming the link."""
    found: list[Path] = []
    for path in paths:
        if path.is_symlink():
            raise file_policy.link_error(path)
        if path.is_file():
            file_policy.check_no_links(path)
            found.append(path)
        elif path.is_dir():
            file_policy.check_no_links(path)
            links = file_policy.links_under(path, (Path("."),))
            if links:
                raise SpecpairError([file_policy.link_error(link).problems[0]
                                     for link in links])
            for name in RUNBOOK_NAMES:
                found.extend(sorted(path.glob(f"*/{name}")))
                if (path / name).is_file():
                    found.append(path / name)
        else:
            raise SpecpairError.single(path, "no such file or folder",
                                       "give a runbook file or a folder such as runbooks/")
    return sorted(set(found))


def runbooks_root(path: Path) -> Path:
    """The runbooks/ tree a file belongs to: Jsonnet imports may not leave it. Found on
    the path as given, not as resolved: a link cannot move the root (links are refused)."""
    full = file_policy.absolute(path)
    for parent in full.parents:
        if parent.name == "runbooks":
            return parent
    return full.parent


def load_runbook(path: Path, display: str | None = None) -> LoadedRunbook:
    display = display or str(path)
    document = load_document(path, runbooks_root(path))
    try:
        runbook = Runbook.model_validate(document.data)
    except ValidationError as exc:
        raise SpecpairError(validation_problems(exc, document, Runbook, display)) from None
    findings = rules.check_runbook(runbook, folder_name=path.parent.name
                                   if path.parent.parent.name == "runbooks" else None)
    if findings:
        raise SpecpairError([Problem(document.location(path_key(f.field), display), f.message,
                                     f.hint) for f in findings])
    return LoadedRunbook(runbook, document, path.parent)


LOCK_SCHEMA = "schema/lock.schema.json"


def load_lock(folder: Path, display: str | None = None) -> tuple[Lock, Document | None]:
    path = folder / LOCK_NAME
    shown = display or str(path)
    if not os.path.lexists(path):
        raise SpecpairError.single(
            shown, "the lock file is missing",
            "run `specpair lock` (hub or local `path:` checkpoints), or `specpair lock "
            "--declare` to write a declared lock from a config.json")
    text = read_text(path, shown)
    # as strict as a runbook: duplicate keys (JSON lets the last win), deep nesting and
    # numbers beyond any physical size are refused before pydantic sees the data
    try:
        json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:  # a lock is JSON: say so, not "not valid YAML"
        raise SpecpairError.single(
            shown, f"{LOCK_NAME} is not valid JSON: {exc.msg}",
            "fix the JSON at this position, or write the lock again with `specpair lock`",
            line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        raise SpecpairError.single(
            shown, f"{LOCK_NAME} nests too deeply to be a lock",
            "write the lock again with `specpair lock`", line=1, column=1) from None
    except (_DuplicateKey, ValueError):
        pass  # the YAML composer below says where (duplicates, 4,300-digit integers, NaN)
    else:
        try:  # the fast path: a valid lock needs no source positions
            return Lock.model_validate_json(text), None
        except ValidationError:
            pass  # parse again with positions, to say where the problem is
    document = load_document(path, display=shown)
    try:
        return Lock.model_validate(document.data), document
    except ValidationError as exc:
        raise SpecpairError(validation_problems(exc, document, Lock, shown,
                                                schema=LOCK_SCHEMA)) from None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _DuplicateKey(keys)
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a lock can hold")


def load_location(source_file: str, field: str) -> Location:
    """The position of a dotted field path in a runbook file, for findings made after
    loading (pre-flight rules, budget checks). Falls back to the file alone."""
    loc: PathKey = tuple(int(p) if p.isdigit() else p for p in field.split(".") if p)
    try:
        document = load_document(Path(source_file), runbooks_root(Path(source_file)))
    except (SpecpairError, OSError):
        return Location(source_file, 0, 0, field)
    line, column = document.locate(loc)
    return Location(source_file, line, column, field)


MAX_RECORD_BYTES = 64 << 20
"""A record of a replay of 10,000 requests is about 6 MB (two servers, a few hundred bytes
a request); every record `specpair bench` writes must load again (issue 52)."""
MAX_RECORD_NODES = 5_000_000
R = TypeVar("R", bound=BaseModel)


def load_record(path: Path, model: type[R], display: str | None = None) -> R:
    """A measurement or staging record: JSON, read under the file policy and parsed with
    the runbooks' limits on nesting and numbers but a record's size. Parsed as plain JSON
    (a YAML composer with positions takes 13 s for 5 MB), and parsed again with positions
    only to say where a problem lies, in files small enough to."""
    shown = display or str(path)
    raw = file_policy.read_bytes(path, MAX_RECORD_BYTES, shown, what=(
        "a record holds a run's statistics and per-request timings: is this a record?"))
    hint = "a record is the JSON `specpair bench` or `staging ingest` wrote"
    document: Document | None = None
    try:
        data = bounded_json(raw.decode("utf-8"), MAX_RECORD_NODES)
    except UnicodeDecodeError:
        raise SpecpairError.single(shown, "invalid UTF-8", hint) from None
    except json.JSONDecodeError as exc:
        raise SpecpairError.single(shown, f"not valid JSON: {exc.msg}", hint,
                                   line=exc.lineno, column=exc.colno) from None
    except ValueError as exc:
        if len(raw) > MAX_FILE_BYTES:
            raise SpecpairError.single(shown, f"a record {exc}", hint, line=1,
                                       column=1) from None
        document = load_document(path, display=shown)  # says where (numbers, nesting)
        data = document.data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        if document is None:
            document = load_document(path, display=shown) if len(raw) <= MAX_FILE_BYTES \
                else Document(path, data, "json", {}, {}, "")
        raise SpecpairError(validation_problems(exc, document, model, shown)) from None


def load_latest_measurement(folder: Path) -> Any:
    """The latest record under <pair>/measurements/ (by the start it holds), or None."""
    found = latest_measurement_file(folder)
    return None if found is None else found[1]


def latest_measurement_file(folder: Path) -> tuple[Path, Any] | None:
    """(file, record) of the latest measurement record, or None. Every record is read and
    validated: the order is their `started_at`, not their names (`load.record_files`)."""
    from specpair.bench.record import Measurement

    records = [(path, load_record(path, Measurement))
               for path in record_paths(folder / MEASUREMENTS_DIR)]
    ordered = by_start(records, lambda m: str(m.started_at))
    return ordered[-1] if ordered else None


# --------------------------------------------------------------------------- error rendering


def validation_problems(exc: ValidationError, document: Document, model: type[BaseModel],
                        display: str, schema: str = "schema/runbook.schema.json"
                        ) -> list[Problem]:
    problems = []
    for error in exc.errors(include_url=False):
        loc: PathKey = tuple(x for x in error["loc"] if x not in UNION_TAGS)
        kind = error["type"]
        message, hint = _explain(kind, error, model, loc, schema)
        line, column = document.locate(loc, key=kind == "extra_forbidden")
        problems.append(Problem(Location(display, line, column, render_path(loc)), message, hint))
    return sorted(problems, key=lambda p: (p.location.line, p.location.column))


def _explain(kind: str, error: Any, model: type[BaseModel], loc: PathKey,
             schema: str = "schema/runbook.schema.json") -> tuple[str, str]:
    msg = error["msg"]
    if kind == "missing":
        return "required field is missing", f"add `{loc[-1]}:` here"
    if kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean `{close[0]}`?" if close else (
            "allowed keys: " + ", ".join(allowed) if allowed else "remove it")
        if " " in str(loc[-1]) and error.get("input") is None:
            # `{rule: SP101, reason: pinned later, see PR}`: in a flow mapping an unquoted
            # comma ends the value, and the rest becomes a key without a value
            hint = ("this looks like text after an unquoted comma in a {…} mapping; quote "
                    "the value it belongs to (e.g. reason: \"…, …\")")
        return f"unknown key {loc[-1]!r}", hint
    given = error.get("input")
    shown = repr(given) if not isinstance(given, (dict, list)) else type(given).__name__
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if kind in ("enum", "literal_error"):
        return f"{msg}; got {shown}", did_you_mean(given, listed_values(error)) or \
            "use one of the listed values"
    if kind == "string_pattern_mismatch" and isinstance(given, str):
        bad = UNSAFE.search(given)
        if bad:
            return (f"holds the control or formatting character U+{ord(bad.group()):04X} "
                    f"at position {bad.start() + 1}", "remove it: such characters can hide "
                    "or reorder text in a terminal, a script or a review")
        if given.startswith("-"):
            return (f"{shown} starts with '-': the engine would read it as an option",
                    "a value never starts with '-'; for a relative path write ./" + given)
    if kind == "string_pattern_mismatch":
        return f"{shown} has the wrong form ({msg})", _pattern_hint(loc)
    if kind in ("finite_number",):
        return f"{msg}; got {shown}", "write a finite number"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{msg}; got {shown}", "use a value inside the allowed range"
    if kind.endswith(("_type", "_parsing")):
        expected = {"int": "a whole number", "float": "a number", "bool": "true or false",
                    "string": "a quoted string", "list": "a list", "dict": "a mapping",
                    "model": "a mapping"}.get(kind.split("_")[0], "a value of the right type")
        return f"{msg}; got {shown}", f"write {expected} here"
    if kind == "value_error":  # a model validator's sentence already says what is wrong
        return str(msg).removeprefix("Value error, "), f"fix the values; the form is in {schema}"
    return f"{msg}; got {shown}", f"see the JSON Schema ({schema}) for the form"


def _pattern_hint(loc: PathKey) -> str:
    last = str(loc[-1]) if loc else ""
    return {
        "name": "lowercase letters, digits and dashes, e.g. qwen3-8b-dflash",
        "repo": "owner/name, e.g. Qwen/Qwen3-8B",
        "revision": "a 40-hex commit (or a branch/tag name without spaces)",
        "version": "an exact release, e.g. 0.5.23",
        "rule": "a rule id such as SP101",
        "commit": "40 lowercase hex digits",
    }.get(last, "see the JSON Schema for the expected form")


def _unwrap_model(annotation: Any) -> type[BaseModel] | None:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated, list):
        for arg in typing.get_args(annotation):
            found = _unwrap_model(arg)
            if found:
                return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _fields_at(model: type[BaseModel], loc: PathKey) -> list[str]:
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return []
        if isinstance(part, int):
            continue
        info = current.model_fields.get(str(part))
        current = _unwrap_model(info.annotation) if info else None
    return sorted(current.model_fields) if current else []
