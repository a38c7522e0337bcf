"""What an engine's own log says about its start: weight load, graph capture, init.

The deployment log times the start from outside (launch → /health). Where the engine
writes how long its parts took, these lines split that phase, so the staging model's
disk bandwidth and graph-capture assumptions can be checked. Each pattern is the
engine's own log message, cited by file; the numbers are the engine's, not ours.
"""

from __future__ import annotations

import re

from specpair.engines import registry
from specpair.engines.logs_model import KV_CAPACITY_KEY, Timing

__all__ = ["KV_CAPACITY_KEY", "Timing", "kv_capacity", "timings"]


OTHER_RANK = re.compile(r"TP0*[1-9]")


def timings(engine: str, text: str) -> dict[str, float]:
    """Sums of each timing the engine logged (a draft model or several graph captures
    add up: they run one after the other)."""
    found: dict[str, float] = {}
    # ranks load and capture at the same time: read rank 0 only (both engines prefix
    # worker lines with their tensor-parallel rank, e.g. `Worker_TP1`, `TP1`)
    lines = [line for line in text.splitlines() if not OTHER_RANK.search(line)]
    release = registry.find_label(engine)
    for timing in release.log_timings if release is not None else ():
        values = [float(m.group(1)) for line in lines for m in timing.pattern.finditer(line)]
        if values:
            found[timing.key] = round(sum(values), 3)
    return found


def kv_capacity(engine: str, text: str) -> int | None:
    """The KV capacity in tokens the engine reported at start-up (its last report on rank
    0), where its release names the line; None otherwise."""
    release = registry.find_label(engine)
    pattern = release.log_kv_capacity if release is not None else None
    if pattern is None:
        return None
    found = [m.group(1) for line in text.splitlines() if not OTHER_RANK.search(line)
             for m in pattern.finditer(line)]
    return int(found[-1].replace(",", "")) if found else None
