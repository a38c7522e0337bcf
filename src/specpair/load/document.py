"""Reading runbooks and locks from disk, keeping where every value came from.

YAML is composed into nodes (not loaded straight into Python objects) so that each key
and value keeps its line and column, duplicate keys are caught, and alias expansion is
bounded. Jsonnet is evaluated with imports confined to the runbooks tree; its output has
no positions of its own, so a field is located by its key in the Jsonnet source.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as _dt
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from specpair.facts.yaml_data import SafeLoader as _Loader  # the C composer keeps the same marks
from specpair.load import file_policy
from specpair.model.errors import Location, Problem, SpecpairError

MAX_FILE_BYTES = file_policy.MAX_FILE_BYTES

MAX_NODES = 100_000
"""Bounds alias expansion ("billion laughs"): every visit of a node counts."""

MAX_DEPTH = 64

JSONNET_MAX_STACK = 200
JSONNET_MAX_TRACE = 20

PathKey = tuple[str | int, ...]


@dataclass
class Document:
    """A parsed source file: plain data plus the position of every key and value."""

    path: Path
    data: Any
    kind: str  # "yaml", "json" or "jsonnet"
    positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    """Where each value starts."""
    key_positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    """Where the key of each mapping entry starts."""
    source_text: str = ""

    def locate(self, loc: PathKey, *, key: bool = False) -> tuple[int, int]:
        """Line and column of the deepest part of `loc` that exists in the source: its
        value, or its key when `key` is set (an unknown key is about the key itself)."""
        if self.kind == "jsonnet":
            return _locate_in_jsonnet(self.source_text, loc)
        if key and tuple(loc) in self.key_positions:
            return self.key_positions[tuple(loc)]
        for end in range(len(loc), -1, -1):
            found = self.positions.get(tuple(loc[:end]))
            if found:
                return found
        return (1, 1)

    def location(self, loc: PathKey, display: str | None = None) -> Location:
        line, column = self.locate(loc)
        return Location(display or str(self.path), line, column, render_path(loc))


def render_path(loc: PathKey) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def render_dotted(loc: PathKey) -> str:
    """A path key as the dotted field path findings carry (`workloads.0.name`)."""
    return ".".join(map(str, loc))


MAX_NUMBER_CHARS = 100
"""No value specpair reads needs a longer number (Python's int() refuses 4,300 digits)."""


def _number(text: str) -> Any:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(text)} characters")
    value = float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{text[:20]} is beyond a float")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number specpair reads")


def bounded_json(text: str, max_nodes: int = MAX_NODES) -> Any:
    """JSON from a file line or a server's answer, with the runbooks' limits: at most
    MAX_DEPTH levels and `max_nodes` values, numbers of at most MAX_NUMBER_CHARS characters,
    no NaN or infinity. Every refusal is a ValueError (json.JSONDecodeError for syntax)
    whose message says what was wrong, never what the text held."""
    try:
        data = json.loads(text, parse_int=_number, parse_float=_number,
                          parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    nodes, stack = 0, [(data, 0)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        if nodes > max_nodes:
            raise ValueError(f"more than {max_nodes:,} values")
        children = node.values() if isinstance(node, dict) else (
            node if isinstance(node, list) else ())
        stack.extend((child, depth + 1) for child in children)
    return data


def read_text(path: Path, display: Path | str | None = None) -> str:
    """Read a UTF-8 source file under the file policy (no link, a regular file, at most
    1 MiB), refusing undecodable ones with a precise error."""
    raw = file_policy.read_bytes(path, MAX_FILE_BYTES, display)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecpairError.single(
            display or path, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x})",
            "save the file as UTF-8", line=line, column=column) from None


def load_document(path: Path, runbooks_root: Path | None = None,
                  display: Path | str | None = None) -> Document:
    """Parse a .yaml/.yml/.json/.jsonnet file into a Document."""
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml", ".json"):
        text = read_text(path, display)
        walker = _compose_yaml(Path(display) if display else path, text)
        return Document(path, walker.data, "json" if suffix == ".json" else "yaml",
                        walker.positions, walker.key_positions, text)
    if suffix == ".jsonnet":
        text = read_text(path)
        data = _evaluate_jsonnet(path, runbooks_root or path.parent, text)
        return Document(path, data, "jsonnet", {}, {}, text)
    raise SpecpairError.single(path, f"unsupported file type {suffix!r}",
                               "runbooks are .yaml, .yml or .jsonnet files")


# --------------------------------------------------------------------------- YAML


class _Walker:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.visits = 0
        self.positions: dict[PathKey, tuple[int, int]] = {}
        self.key_positions: dict[PathKey, tuple[int, int]] = {}
        self.data: Any = None
        self.problems: list[Problem] = []
        self._scalar = yaml.constructor.SafeConstructor()

    def _mark(self, node: yaml.Node) -> tuple[int, int]:
        return (node.start_mark.line + 1, node.start_mark.column + 1)

    def fail(self, node: yaml.Node, loc: PathKey, message: str, hint: str) -> None:
        line, column = self._mark(node)
        self.problems.append(
            Problem(Location(str(self.path), line, column, render_path(loc)), message, hint))

    def walk(self, node: yaml.Node, loc: PathKey, depth: int = 0) -> Any:
        self.visits += 1
        if self.visits > MAX_NODES:
            raise SpecpairError.single(
                self.path, f"the document expands to more than {MAX_NODES} nodes",
                "YAML aliases that multiply (an alias bomb) are not allowed; write values out",
                line=self._mark(node)[0], column=self._mark(node)[1])
        if depth > MAX_DEPTH:
            raise SpecpairError.single(
                self.path, f"the document nests deeper than {MAX_DEPTH} levels",
                "a runbook is shallow; check for recursive aliases",
                line=self._mark(node)[0], column=self._mark(node)[1])
        self.positions.setdefault(loc, self._mark(node))
        if isinstance(node, yaml.MappingNode):
            result: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    self.fail(key_node, loc, "YAML merge keys (<<) are not supported",
                              "write the keys out, or use a Jsonnet runbook to share values")
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    self.fail(key_node, loc, "a mapping key must be a plain string",
                              "use a simple name as key")
                    continue
                key = str(key_node.value)
                child = (*loc, key)
                if key in result:
                    first = self.key_positions.get(child, (0, 0))
                    self.fail(key_node, child, f"duplicate key {key!r} (first at line {first[0]})",
                              "remove one of the two entries")
                    continue
                self.key_positions[child] = self._mark(key_node)
                result[key] = self.walk(value_node, child, depth + 1)
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.walk(item, (*loc, i), depth + 1) for i, item in enumerate(node.value)]
        return self._construct_scalar(node, loc)

    def _construct_scalar(self, node: yaml.Node, loc: PathKey) -> Any:
        try:
            value = self._scalar.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            self.fail(node, loc, f"cannot read this value: {exc}", "quote it as a string")
            return None
        except ValueError:  # Python's int() refuses more than 4,300 digits
            self.fail(node, loc, f"a number of {len(str(node.value))} characters",
                      "no value in a runbook or lock needs more than a few digits")
            return None
        if isinstance(value, (_dt.date, _dt.datetime, bytes)):
            return str(node.value)  # dates and binary stay the text the author wrote
        return value


def _compose_yaml(path: Path, text: str) -> _Walker:
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise SpecpairError.single(
            path, f"not valid YAML: {exc.problem or exc.context}",
            "fix the syntax at this position (indentation, quotes, colons)",
            line=line, column=column) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise SpecpairError.single(
            path, f"not valid YAML: the character U+{ord(exc.character):04X} is not allowed"
            if isinstance(exc.character, str) else f"not valid YAML: {exc.reason}",
            "remove the control character (or write it as an escape in a quoted string)",
            line=line, column=column) from None
    except yaml.YAMLError as exc:
        raise SpecpairError.single(path, f"not valid YAML: {exc}", "fix the syntax",
                                   line=1, column=1) from None
    if len(nodes) != 1:
        where = nodes[1].start_mark if len(nodes) > 1 else None
        raise SpecpairError.single(
            path, "empty document" if not nodes else f"{len(nodes)} YAML documents in one file",
            "a file holds exactly one document (remove the `---` separator and what follows)"
            if nodes else "write the runbook's mapping (pair:, engine:, …) into the file",
            line=where.line + 1 if where else 1, column=where.column + 1 if where else 1)
    walker = _Walker(path)
    walker.data = walker.walk(nodes[0], ())
    if walker.problems:
        raise SpecpairError(walker.problems)
    return walker


# --------------------------------------------------------------------------- Jsonnet

_JSONNET_POS = re.compile(r"(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+)")


JSONNET_TIMEOUT_S = 10.0
"""Override per run with SPECPAIR_JSONNET_TIMEOUT_S."""
JSONNET_MEMORY_BYTES = 2 << 30


def _jsonnet_child(path: str, source: str, root: str, conn: Any) -> None:
    """Evaluate in a forked child: the parent enforces the time limit, the child its own
    address-space limit, so neither an endless loop nor a memory bomb reaches the build."""
    import faulthandler
    import os
    import resource

    import _jsonnet

    # an allocation failure aborts inside the C++ evaluator and the parent reports it; the
    # abort is expected, so neither stderr nor a faulthandler inherited from the parent
    # (pytest's, or PYTHONFAULTHANDLER's, which writes to its own copy of fd 2) prints it
    faulthandler.disable()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    with contextlib.suppress(ValueError, OSError):  # a platform without the limit
        resource.setrlimit(resource.RLIMIT_AS, (JSONNET_MEMORY_BYTES, JSONNET_MEMORY_BYTES))
    base = Path(root)

    def confined_import(directory: str, relative: str) -> tuple[str, bytes]:
        # lexical, not resolved: a link is refused by the file policy, never followed, so
        # the import root stays the runbooks/ folder the runbook was found in
        target = Path(os.path.normpath(Path(directory) / relative))
        if not target.is_relative_to(base):
            raise RuntimeError(
                f"import {relative!r} leaves the runbooks tree ({base}); "
                "only files under runbooks/ may be imported")
        try:
            return str(target), file_policy.read_bytes(target, MAX_FILE_BYTES)
        except SpecpairError as exc:
            raise RuntimeError(f"import {relative!r}: {exc.problems[0].message}") from None

    try:
        output = _jsonnet.evaluate_snippet(path, source, import_callback=confined_import,
                                           max_stack=JSONNET_MAX_STACK,
                                           max_trace=JSONNET_MAX_TRACE)
        conn.send(("ok", output))
    except RuntimeError as exc:
        conn.send(("error", str(exc)))
    except MemoryError:
        conn.send(("error", f"evaluation needs more than {JSONNET_MEMORY_BYTES >> 20} MiB"))
    finally:
        conn.close()


def _evaluate_jsonnet(path: Path, root: Path, source: str | None = None) -> Any:
    """Evaluate the runbook's text (read under the file policy by the caller); imports
    may reach only files under `root`, the runbooks/ folder, itself never a link."""
    import multiprocessing

    if source is None:
        source = read_text(path)
    file_policy.check_no_links(root)
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_jsonnet_child,
                              args=(str(file_policy.absolute(path)), source,
                                    str(file_policy.absolute(root)), child))
    process.start()
    child.close()
    try:
        limit = float(os.environ.get("SPECPAIR_JSONNET_TIMEOUT_S", JSONNET_TIMEOUT_S))
        if not parent.poll(limit):
            raise SpecpairError.single(
                path, f"Jsonnet evaluation did not finish within {limit:g} s",
                "a runbook evaluates in milliseconds; look for unbounded recursion or loops")
        try:
            status, payload = parent.recv()
        except EOFError:
            raise SpecpairError.single(
                path, "Jsonnet evaluation was killed (out of memory?)",
                f"a runbook must evaluate within {JSONNET_MEMORY_BYTES >> 20} MiB") from None
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        parent.close()
    if status == "ok":
        return json.loads(payload)
    message = payload.strip()
    first = message.splitlines()[0] if message else "evaluation failed"
    line = column = 0
    for match in _JSONNET_POS.finditer(message):
        if Path(match["file"]).name == path.name:
            line, column = int(match["line"]), int(match["col"])
            break
    raise SpecpairError.single(path, f"Jsonnet evaluation failed: {first}",
                               "fix the Jsonnet expression at this position",
                               line=line, column=column)


_JSONNET_FIELD = re.compile(
    r"""(?<![\w-])(?:"([^"\\\n]*)"|'([^'\\\n]*)'|([A-Za-z_]\w*))\s*\+?:{1,3}""")


class _JsonnetIndex:
    """Every field definition of a Jsonnet source (`name:`, `name+:`, `name::`,
    `"name":`), found in one pass: locating N errors costs O(size + N log size), not
    O(N × size) (8,000 unknown keys in a 900 KB runbook took 89 s that way)."""

    def __init__(self, text: str) -> None:
        self.fields: dict[str, list[int]] = {}
        for match in _JSONNET_FIELD.finditer(text):
            name = next(g for g in match.groups() if g is not None)
            self.fields.setdefault(name, []).append(match.start())
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def after(self, name: str, offset: int) -> int | None:
        """The first definition of `name` at or after `offset`."""
        starts = self.fields.get(name)
        if not starts:
            return None
        i = bisect.bisect_left(starts, offset)
        return starts[i] if i < len(starts) else None


_INDEXES: dict[int, tuple[str, _JsonnetIndex]] = {}


def _jsonnet_index(text: str) -> _JsonnetIndex:
    cached = _INDEXES.get(id(text))
    if cached is not None and cached[0] is text:
        return cached[1]
    index = _JsonnetIndex(text)
    _INDEXES.clear()  # one source at a time: errors are located file by file
    _INDEXES[id(text)] = (text, index)
    return index


def _locate_in_jsonnet(text: str, loc: PathKey) -> tuple[int, int]:
    """Find the field `loc` in the Jsonnet source text.

    Jsonnet output carries no positions, so this is a best effort: each named part of
    the path is searched as a field definition (`name:`, `name+:`, `name::`, `"name":`)
    after the place where its parent was found; the deepest part found wins, else the
    top of the file.
    """
    index = _jsonnet_index(text)
    best = (1, 1)
    offset = 0
    for part in loc:
        if isinstance(part, int):
            continue
        found = index.after(str(part), offset)
        if found is None:
            break
        offset = found + 1
        best = index.position(found)
    return best
