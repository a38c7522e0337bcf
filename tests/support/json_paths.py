"""Paths into JSON-like data, for tests that mutate one leaf of a real input."""

from __future__ import annotations

from typing import Any


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path in `value`: the containers' own and their leaves', depth first."""
    if isinstance(value, dict):
        return [path] + [p for k, v in value.items() for p in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [path] + [p for i, v in enumerate(value) for p in leaves(v, (*path, i))]
    return [path]
