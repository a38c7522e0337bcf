"""One server argument as a release resolved it, in a form two releases can be compared in.

Each release package computes its typed server arguments once from the runbook
(`<release>/args.py`, the engine's defaults applied there and nowhere else); the launch
renders them and the budget reads them. `ServerArg` is the same arguments as plain rows,
keyed by what they mean rather than how a release spells them, so that `specpair impact`
can say what an upgrade renames, removes or re-defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ServerArg:
    key: str
    """What the argument means, the same for every release (`memory_fraction`)."""
    label: str
    flag: str
    """How this release spells it on its command line."""
    value: str
    default: bool
    """True when the runbook leaves it to the release's default."""
    how: str = ""
    """How the release sets the default (its parser, or its resolution when the parser has
    none), where two releases may agree on the value but not on how they reach it."""


class ResolvedArgs(Protocol):
    """A release's typed server arguments (each release has its own fields)."""

    def rows(self) -> list[ServerArg]: ...
