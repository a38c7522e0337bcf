"""The one finding type: what a rule found, where, and how to fix it.

The loader's consistency rules, the gate's rules and an engine release's pre-flight rules
all report `Finding`s. A finding names its field as a dotted path; the position in the
file (line, column) is attached at the edge, from the document the loader holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from specpair.model.catalogue import Severity
from specpair.model.errors import Location


@dataclass(frozen=True)
class Finding:
    rule: str
    """The catalogue id (checks, pre-flight: SP901 errors, SP902 warnings); "" for the
    loader's consistency rules, which are not waivable and have no id."""
    severity: Severity
    message: str
    field: str
    hint: str
    waived: str | None = None  # the waiver's reason
    where: Location | None = None  # when the finding is about another file (lock.json)


def path_key(field: str) -> tuple[str | int, ...]:
    """A dotted field path as the loader's path key (list indices as ints)."""
    return tuple(int(p) if p.isdigit() else p for p in field.split(".") if p)
