"""Errors a user can cause, with the place in their file and a hint to fix them.

Tracebacks are for bugs in specpair; everything a runbook author, a lock file or the
command line can get wrong is a `SpecpairError` carrying one or more `Problem`s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, order=True)
class Location:
    """A place in a source file; line and column are 1-based, 0 means unknown."""

    file: str
    line: int = 0
    column: int = 0
    field: str = ""

    def render(self) -> str:
        where = self.file
        if self.line:
            where += f":{self.line}:{self.column or 1}"
        if self.field:
            where += f": {self.field}"
        return where


@dataclass(frozen=True)
class Problem:
    location: Location
    message: str
    hint: str = ""

    def render(self) -> str:
        from specpair.model.common import inert  # no control character reaches a terminal

        text = f"{inert(self.location.render())}: {inert(self.message)}"
        if self.hint:
            text += f"\n    hint: {inert(self.hint)}"
        return text


@dataclass
class SpecpairError(Exception):
    """One or more problems that stop the current operation."""

    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.render())

    @classmethod
    def single(cls, file: str | Path, message: str, hint: str = "", *, line: int = 0,
               column: int = 0, field_path: str = "") -> SpecpairError:
        return cls([Problem(Location(str(file), line, column, field_path), message, hint)])

    def render(self) -> str:
        return "\n".join(p.render() for p in self.problems)

    def __str__(self) -> str:
        return self.render()
