"""Formatting shared by the generators: units, numbers, escaped table cells, and the one
JSON form of generated files."""

from __future__ import annotations

import html
import json
from typing import Any

from specpair.model.common import inert

GIB = 1 << 30


def dump_json(data: Any) -> bytes:
    """The one JSON form of generated files: sorted keys, two-space indent, final newline."""
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def gib(n: int | float) -> str:
    """Bytes as GiB with the exact byte count, e.g. `11.76 GiB (12,630,... B)`."""
    return f"{n / GIB:,.2f} GiB"


def num(n: int | float) -> str:
    if isinstance(n, float) and not n.is_integer():
        return f"{n:,.3f}".rstrip("0").rstrip(".")
    return f"{int(n):,}"


def cell(text: object) -> str:
    """Text safe inside a Markdown table cell (and in the HTML it becomes)."""
    return inert(html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " "))


def value(v: int | float | str, unit: str) -> str:
    if isinstance(v, str):
        return cell(v)
    if unit == "B":
        return f"{num(v)} B ({gib(v)})" if abs(v) >= 1 << 20 else f"{num(v)} B"
    if unit == "fraction":
        return f"{v:g}"
    return f"{num(v)} {unit}".strip()


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
