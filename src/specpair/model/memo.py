"""Process-wide memos of pure functions, keyed on the values of every argument.

The site plans every pair: hundreds of candidates per pair, whose step times, latency
points and budget parts repeat for equal inputs (a candidate's budget is computed for its
screening variant and again for its final one; a schedule, the gate's latency model and
the planner each ask for the step times of one setup at one batch). `value_memo` caches a
function whose arguments are frozen values (numbers, strings, enums, tuples, frozen
dataclasses and frozen pydantic models, which hash and compare by value), so the key is
*every* input the function reads: never an object's identity, never a subset. A function
that reads anything besides its arguments (a file, a global that changes, a mutable
argument) must not be memoised this way. The results are shared between callers, so they
must be immutable too.

Bounded (least recently used) so that a long process keeps a working set, not every
call; `typed`: 1 and 1.0 are distinct keys, as the results may print differently.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

SIZE = 1 << 16
"""Entries per memoised function: a site build of 100 pairs keeps ~10^4 step times."""


_MEMOS: list[Any] = []


def value_memo(function: F) -> F:
    """`function`, memoised on the values of all its arguments (see the module)."""
    memo = functools.lru_cache(maxsize=SIZE, typed=True)(function)
    _MEMOS.append(memo)
    return memo  # type: ignore[return-value]


def clear() -> None:
    """Empties every memo (tests compare results with and without what others left)."""
    for memo in _MEMOS:
        memo.cache_clear()
