"""Editing a runbook's Jsonnet text: Jsonnet has no parser in Python, so a small lexer finds
object literals and field definitions in the runbook's own text; a field is replaced
where the runbook sets it with a literal, else added to the object literal it belongs in
(imported libraries are never edited: a field they define is overridden here instead)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from specpair.load.edit_splices import Draft, FieldValue, Scalar, Splice, Tree, dotted, put


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


def jsonnet_override_hint(changes: list[FieldValue]) -> str:
    tree: Tree = {}
    for path, value in changes:
        put(tree, path, value)
    return ", ".join(_jsonnet_members(tree))


def jsonnet_draft(text: str, changes: list[FieldValue], newline: str) -> Draft:
    draft = Draft()
    try:
        source = _JsonnetText(text)
    except _LexError as exc:
        draft.refusals.append(f"cannot read the runbook's Jsonnet text ({exc}); add "
                              f"{jsonnet_override_hint(changes)} by hand")
        return draft
    outer = source.outermost_object()
    if outer is None:
        draft.refusals.append("the runbook does not end in an object literal ({ ... } or "
                              f"base {{ ... }}); add {jsonnet_override_hint(changes)} by hand")
        return draft
    inserts: dict[int, tuple[int, Tree]] = {}
    for path, value in changes:
        shown = dotted(path)
        opener = outer
        for i, key in enumerate(path):
            found = source.find(opener, key)
            if found is None:
                put(inserts.setdefault(opener, (i, {}))[1], path[i:], value)
                break
            first, end = found.value
            start, stop = source.span(first, end)
            expression = text[start:stop]
            if i == len(path) - 1:
                if source.literal(first, end):
                    quote = text[start] if source.tokens[first].kind == "str" else "'"
                    draft.splices.append(Splice(start, stop, jsonnet_scalar(value, quote)))
                else:
                    draft.manual.append(
                        f"{shown}: the runbook sets it with an expression, not a literal "
                        f"({_clip(expression)}); replacing that with a literal would drop what "
                        "it computes, so the suggested patch is for a person to judge")
                    draft.splices.append(Splice(start, stop, jsonnet_scalar(value)))
                break
            inner = source.object_of(first, end)
            if inner is None:
                here = dotted(path[:i + 1])
                draft.manual.append(
                    f"{shown}: {here} is an expression in the runbook ({_clip(expression)}), "
                    "not an object literal to add the field to; the suggested patch merges "
                    "an object onto it")
                tree: Tree = {}
                put(tree, path[i + 1:], value)
                members = ", ".join(_jsonnet_members(tree))
                draft.splices.append(Splice(start, stop, f"({expression}) + {{ {members} }}"))
                break
            opener = inner
    for opener, (depth, tree) in inserts.items():
        draft.splices.extend(_jsonnet_insert(source, opener, tree, newline, -depth))
    return draft


def _clip(expression: str) -> str:
    flat = " ".join(expression.split())
    return flat if len(flat) <= 60 else flat[:57] + "..."


def _jsonnet_insert(source: _JsonnetText, opener: int, tree: Tree, newline: str,
                    order: int) -> list[Splice]:
    """New fields at the end of an object literal, in its layout: one line each when the
    object spans lines, else `, field: value` before the closing brace."""
    text, tokens = source.text, source.tokens
    closer = source.match[opener]
    members = _jsonnet_members(tree)
    open_end, close_start = tokens[opener].end, tokens[closer].start
    if closer == opener + 1:  # an empty object
        inside = text[open_end:close_start]
        if inside.strip():  # only comments inside: keep them
            return [Splice(open_end, open_end, " " + ", ".join(members) + ",", order)]
        return [Splice(open_end, close_start, " " + ", ".join(members) + " ", order)]
    last = tokens[closer - 1]
    comma = last.kind == "punct" and last.text == ","
    line_end = text.find("\n", last.end)
    if "\n" not in text[open_end:close_start] or line_end == -1 or line_end > close_start:
        joined = ", ".join(members)
        if comma:
            return [Splice(last.end, last.end, f" {joined},", order)]
        return [Splice(last.end, last.end, f", {joined}", order)]
    if text[line_end - 1] == "\r":
        line_end -= 1
    first_member = source.members(opener)[-1][0]
    line_start = text.rfind("\n", 0, tokens[first_member].start) + 1
    indent = text[line_start:tokens[first_member].start]
    if indent.strip():  # the member does not start its line: indent past the brace's line
        brace_line = text.rfind("\n", 0, close_start) + 1
        indent = re.match(r"[ \t]*", text[brace_line:]).group() + "  "  # type: ignore[union-attr]
    splices = [] if comma else [Splice(last.end, last.end, ",", order)]
    added = "".join(f"{newline}{indent}{member}," for member in members)
    splices.append(Splice(line_end, line_end, added, order))
    return splices
