"""Records on disk (`<pair>/measurements/*.json`, `<pair>/measurements/staging/*.json`):
found, their names checked, ordered by the start they hold.

A pull request commits records as it commits runbooks, and the latest record feeds the
card, break-even and the alert thresholds. Ordered by file name, a record named to sort
last (`99999999T999999Z.json`, `zz.json`) stayed "the latest" for ever. So a name must be
the past UTC time the record was written, as `specpair bench` and `specpair staging
ingest` name them, and the order is the validated `started_at` inside (a time no later
than now, `model.common.PastUtcTime`), the name breaking ties.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from specpair.model.common import CLOCK_SKEW, inert, utc_time
from specpair.model.errors import Location, Problem, SpecpairError

NAME = re.compile(r"^(\d{8}T\d{6}Z)\.json$")
NAME_TIME = "%Y%m%dT%H%M%SZ"
R = TypeVar("R")


def _name_problem(name: str) -> str | None:
    found = NAME.match(name)
    if found is None:
        return "is not a UTC time"
    try:
        when = dt.datetime.strptime(found.group(1), NAME_TIME).replace(tzinfo=dt.UTC)
    except ValueError:
        return "is not a valid UTC time"
    if when > dt.datetime.now(dt.UTC) + CLOCK_SKEW:
        return "is a time in the future"
    return None


def record_paths(folder: Path) -> list[Path]:
    """The record files of a records folder (none if it does not exist), every name checked."""
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    problems = [
        Problem(Location(str(path), 0, 0, ""),
                f"record file name {inert(path.name)!r} {problem}: records are ordered by "
                "their start, and a name must be the past UTC time the record was written",
                "name it YYYYMMDDTHHMMSSZ.json, the UTC time it was written (as `specpair "
                "bench` and `specpair staging ingest` do), or remove it")
        for path in paths if (problem := _name_problem(path.name)) is not None]
    if problems:
        raise SpecpairError(problems)
    return paths


def by_start(records: list[tuple[Path, R]], started_at: Callable[[R], str]
             ) -> list[tuple[Path, R]]:
    """Oldest first, by the UTC start each record holds (already validated), then name."""
    return sorted(records, key=lambda item: (utc_time(started_at(item[1])), item[0].name))
