"""A runbook repository: its `specpair.toml` (written by `specpair init`) and the commands
that exist in it.

specpair's own repository drives everything through nox (`nox -s build`); a platform
team's repository that `specpair init` scaffolded has no noxfile, only the `specpair`
command. Messages that tell the user what to run name the command of the repository they
are in.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from specpair import __version__
from specpair.model.errors import SpecpairError

CONFIG = "specpair.toml"
# The layout this release reads and writes; specpair.toml states it, and other values are
# refused rather than silently ignored.
LAYOUT = {"runbooks": "runbooks", "schema": "schema", "site": "site"}


@dataclass(frozen=True)
class Commands:
    build: str    # regenerate every output (and the site)
    engines: str  # re-validate the launch flags and defaults of an engine release


DEVELOPMENT = Commands(build="nox -s build", engines="nox -s engines")
ADOPTED = Commands(build="specpair build",
                   engines="`specpair validate`, then start the new release once with "
                           "the generated launch command")


def commands(root: Path) -> Commands:
    """specpair's own repository (a noxfile and no specpair.toml) runs nox sessions; any
    other repository the `specpair` command itself."""
    if not (root / CONFIG).is_file() and (root / "noxfile.py").is_file():
        return DEVELOPMENT
    return ADOPTED


@dataclass(frozen=True)
class Config:
    version: str


def load_config(root: Path) -> Config | None:
    """The repository's specpair.toml, checked: the pinned release must be the one running
    (another release may generate other bytes, and `build --check` would then fail on
    outputs the pinned one wrote), the layout the one this release uses. None without one."""
    path = root / CONFIG
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecpairError.single(path, f"not valid TOML: {exc}",
                                   "fix the file, or rewrite it with `specpair init --force`"
                                   ) from None
    table = data.get("specpair")
    if not isinstance(table, dict) or not isinstance(table.get("version"), str):
        raise SpecpairError.single(path, "no [specpair] table with a version string",
                                   f'add [specpair] version = "{__version__}"')
    version = table["version"]
    if version != __version__:
        raise SpecpairError.single(
            path, f"this repository pins specpair {version}; this is specpair {__version__}",
            f"install the pinned release (python -m pip install 'specpair=={version}'), or "
            f"raise the pin to {__version__} and run `specpair build` to regenerate")
    for key, expected in LAYOUT.items():
        given = table.get(key, expected)
        if given != expected:
            raise SpecpairError.single(
                path, f"{key} = {given!r}: specpair {__version__} keeps {key} in "
                f"{expected}/", f'set {key} = "{expected}" (or leave it out)')
    return Config(version=version)
