"""Runbook variants: a pair whose runbook has a candidate's changes made, validated section
by section, and the changes a written runbook would carry."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from specpair.facts import hardware
from specpair.model.runbook import Runbook
from specpair.resolve.pair import ResolvedPair

Changes = dict[tuple[str, ...], Any]


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Sets `path` in `data`, copying each dict along it first: the rest stays shared with
    the dump `data` was copied from, which is therefore never changed."""
    for key in path[:-1]:
        child = dict(data[key]) if key in data else {}
        data[key] = child
        data = child
    data[path[-1]] = value


_ABSENT = object()


def at_path(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path` in a runbook dump (`_ABSENT` where it has none)."""
    value: Any = data
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return _ABSENT
        value = value[key]
    return value


def hashable(value: Any) -> tuple[str, Any]:
    """A change's value as a key: typed (1, 1.0 and True are equal in Python but not in a
    runbook), dicts and lists (an inline GPU) as canonical JSON."""
    if isinstance(value, dict | list):
        return "json", json.dumps(value, sort_keys=True)
    return type(value).__name__, value


def _get(rb: Runbook, path: tuple[str, ...]) -> Any:
    value: Any = rb
    for key in path:
        value = getattr(value, key)
    return value.value if hasattr(value, "value") else value


_SECTIONS: dict[str, TypeAdapter[Any]] = {
    name: TypeAdapter(info.rebuild_annotation()) for name, info in Runbook.model_fields.items()}
# Runbook has no validators of its own (only its sections do), so validating the changed
# sections alone accepts and builds exactly what validating the whole runbook would
_WHOLE = bool(Runbook.__pydantic_decorators__.model_validators
              or Runbook.__pydantic_decorators__.field_validators)


SectionKey = tuple[str, tuple[tuple[tuple[str, ...], tuple[str, Any]], ...]]


def _validated(rb: Runbook, section: Callable[[str], Any], changes: Changes,
               sections: dict[SectionKey, Any] | None = None) -> Runbook:
    """`Runbook.model_validate(data)`, where `data` is `rb`'s dump with `changes` and
    `section(name)` is `data[name]`: the sections they touch are validated, the rest is
    `rb`'s already validated sections (a plan search validates a variant per candidate;
    the whole runbook each time was a tenth of its cost). `sections`: validated sections
    by the changes made to them, kept by a caller whose `data` is always `rb`'s dump with
    `changes` (a plan's variants share a few dozen deployment, speculation and acceptance
    sections); a section found there is not built again."""
    if _WHOLE:
        data = {name: section(name) for name in Runbook.model_fields}
        return Runbook.model_validate({k: v for k, v in data.items() if v is not _ABSENT})
    by_section: dict[str, list[tuple[tuple[str, ...], tuple[str, Any]]]] = {}
    for path, value in changes.items():  # each section's changes, in one pass
        by_section.setdefault(path[0], []).append((path, hashable(value)))
    update = {}
    for name in sorted(by_section):
        if sections is None:
            update[name] = _SECTIONS[name].validate_python(section(name))
            continue
        key = (name, tuple(sorted(by_section[name])))
        if key not in sections:
            sections[key] = _SECTIONS[name].validate_python(section(name))
        update[name] = sections[key]
    return rb.model_copy(update=update)


def variant(pair: ResolvedPair, changes: Changes, dump: dict[str, Any] | None = None,
            sections: dict[SectionKey, Any] | None = None) -> ResolvedPair:
    """The pair with its runbook changed; resolved facts (geometry, bytes) stay. `dump`:
    `pair.runbook.model_dump(mode="json")` made once by the caller (it is not changed:
    `_set` copies what it changes, and the schema has no before-validators that could
    change their input). `sections`: a memo of validated sections (`_validated`), only
    ever passed with variants of this one pair."""
    base = pair.runbook.model_dump(mode="json") if dump is None else dump

    def section(name: str) -> Any:
        """Section `name` of `base` with `changes`: what setting each change in a copy of
        the whole dump leaves there (a change touches its own section alone)."""
        data = {name: base[name]} if name in base else {}
        for path, value in changes.items():
            if path[0] == name:
                _set(data, path, value)
        return data.get(name, _ABSENT)

    try:
        rb = _validated(pair.runbook, section, changes, sections)
    except ValidationError as exc:  # a planner bug, not the user's input
        raise AssertionError(f"planner built an invalid runbook: {exc}") from None
    return pair.model_copy(update={"runbook": rb, "measurement": None,
                                   "engine": f"{rb.engine.name.value} {rb.engine.version}",
                                   "gpu": hardware.display_key(rb.deployment.gpu)})


def gpu_value(rb: Runbook, key: str) -> Any:
    """The runbook value for a searched GPU: the runbook's own inline GPU stays inline
    (its name is no catalog key)."""
    own = rb.deployment.gpu
    return own.model_dump(mode="json") if not isinstance(own, str) and key == own.name else key


def effective_changes(pair: ResolvedPair, changes: Changes) -> dict[str, Any]:
    """Dotted field → value for the changes that differ from the runbook (for --write)."""
    out = {}
    for path, value in sorted(changes.items()):
        current = _get(pair.runbook, path)
        if hasattr(current, "model_dump"):  # an inline GPU: compare as data
            current = current.model_dump(mode="json")
        if current != value:
            out[".".join(path)] = value
    return out


