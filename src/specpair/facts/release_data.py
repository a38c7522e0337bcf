"""A supported engine release's own data files (`specpair/engines/<name>_<version>/`),
read as package data: what a release decides, kept in its folder."""

from __future__ import annotations

from importlib import resources


def release_text(label: str, name: str) -> str | None:
    """The text of data file `name` of release `label` ("sglang 0.5.23"), None where the
    release has none."""
    engine, version = label.split()
    package = f"specpair.engines.{engine}_{version.replace('.', '_')}"
    path = resources.files(package).joinpath(name)
    return path.read_text(encoding="utf-8") if path.is_file() else None
