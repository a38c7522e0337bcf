"""A runbook repository: its `specpair.toml` (written by `specpair init`) and the commands
that exist in it.

specpair's own repository drives everything through nox (`nox -s build`); a platform
team's repository that `specpair init` scaffolded has no noxfile, only the `specpair`
command. Messages that tell the user what to run name the command of the repository they
are in.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from specpair import __version__
from specpair.model.errors import SpecpairError

CONFIG = "specpair.toml"
# specpair is not on PyPI: teams install it from a git repository at the tag v<version>.
# No canonical public repository is named yet (pyproject has no project.urls), so this is
# a placeholder under example.com, reserved for examples: never someone else's code; the
# README's install line says to replace it, and `init` writes the URL specpair was
# really installed from where pip recorded one.
PLACEHOLDER_SOURCE = "https://git.example.com/your-org/specpair"
# what CI may install from: https only, no user or password, no query or fragment (the
# workflow checks the same pattern before pip sees it)
SOURCE_PATTERN = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~-]+)+")
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


def requirement(source: str, version: str) -> str:
    """What pip installs: the [site] extra, from the repository at the release's tag."""
    return f"specpair[site] @ git+{source}@v{version}"


def installed_source() -> str:
    """The repository this specpair was installed from, as pip recorded it (PEP 610's
    direct_url.json) when that was a git URL CI can reach; else the placeholder."""
    try:
        recorded = metadata.distribution("specpair").read_text("direct_url.json")
        direct = json.loads(recorded or "{}")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return PLACEHOLDER_SOURCE
    url = direct.get("url") if isinstance(direct, dict) else None
    vcs = direct.get("vcs_info") if isinstance(direct, dict) else None
    if isinstance(url, str) and isinstance(vcs, dict) and vcs.get("vcs") == "git" and \
            SOURCE_PATTERN.fullmatch(url):
        return url
    return PLACEHOLDER_SOURCE


@dataclass(frozen=True)
class Config:
    version: str
    source: str | None  # None in a specpair.toml written before CI installed from git


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
    version, source = table["version"], table.get("source")
    if source is not None and not (isinstance(source, str) and SOURCE_PATTERN.fullmatch(source)):
        raise SpecpairError.single(
            path, f"source = {source!r}: not the https URL of a git repository",
            f'set source = "{PLACEHOLDER_SOURCE}" to where your specpair repository lives '
            "(no user, password, query or fragment)")
    if version != __version__:
        raise SpecpairError.single(
            path, f"this repository pins specpair {version}; this is specpair {__version__}",
            f"install the pinned release (python -m pip install "
            f"'{requirement(source or PLACEHOLDER_SOURCE, version)}'), or "
            f"raise the pin to {__version__} and run `specpair build` to regenerate")
    for key, expected in LAYOUT.items():
        given = table.get(key, expected)
        if given != expected:
            raise SpecpairError.single(
                path, f"{key} = {given!r}: specpair {__version__} keeps {key} in "
                f"{expected}/", f'set {key} = "{expected}" (or leave it out)')
    return Config(version=version, source=source)
