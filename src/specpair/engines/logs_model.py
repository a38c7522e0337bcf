"""A line of an engine's own start-up log that says how long a part of the start took
(each release lists its own in `<release>/logs.py`)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    key: str
    pattern: re.Pattern[str]
    source: str


KV_CAPACITY_KEY = "kv_capacity_tokens"
"""Where a staging record keeps the KV capacity the engine logged at start-up (the detail
of its engine_start phase), for the budget of a release whose KV size is measured there."""
