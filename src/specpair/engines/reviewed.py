"""Reviewed facts about how one release differs from another release of the same engine.

Each fact was read in both releases' own code and names where (file:line in the wheel of
the release it describes). A release package lists the facts that separate it from the
release it was copied from (`facts.DIFFERENCES`); `kind` says what the difference touches,
so that an upgrade checklist can say what to re-check without re-reading the engines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["flag", "default", "method", "rule", "budget", "metric", "module"]


@dataclass(frozen=True)
class ReleaseFact:
    kind: Kind
    subject: str
    """The flag, default, method, rule or module the fact is about."""
    here: str
    """What this release does."""
    there: str
    """What the other release (`compared_with`) does."""
    effect: str
    """What it changes for a pair: its command, budget, gate or measurement."""
    source: str
    """Where this release says so (file:line in its wheel)."""
