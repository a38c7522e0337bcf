"""What the install tests share: the type of the `run` fixture (tests/install/conftest.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

Run = Callable[..., subprocess.CompletedProcess[str]]
