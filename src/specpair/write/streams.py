"""The command's own output streams: stdout and stderr that survive a reader which stops
early. The guard redirects a closed pipe's descriptor into /dev/null, the one file it
opens."""

from __future__ import annotations

import os
from typing import Any, TextIO


class PipeGuard:
    """stdout that survives a reader which stops early (`specpair … | head -1`).

    Once the pipe is closed further output is discarded, but the command runs to its end
    and its exit status is kept: a failing check piped into `head` must still fail."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.closed_pipe = False

    def _discard(self) -> None:
        self.closed_pipe = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.inner.fileno())  # buffered bytes now flush into nothing
        os.close(devnull)

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                return self.inner.write(text)
            except BrokenPipeError:
                self._discard()
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._discard()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
