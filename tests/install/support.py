"""What the install tests share: the types of the fixtures in tests/install/conftest.py."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Run = Callable[..., subprocess.CompletedProcess[str]]


@dataclass(frozen=True)
class Served:
    clone: Path      # the bare clone standing for the README's repository URL
    url: str         # the README's repository URL
    tag: str         # the README's tag
    gitconfig: Path  # git's global config that rewrites url to clone


@dataclass(frozen=True)
class Adopted:
    folder: Path     # where the README's commands ran
    output: str      # what they printed
