"""The build pipeline: load → resolve → analyse → generate → write, for every runbook.

Every runbook is loaded and resolved before anything is written; one bad runbook fails
the build with all problems of all files and leaves every previous output as it was.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from specpair.analyse.analysis import Analysis
from specpair.generate import PAIR_GENERATORS, TREE_GENERATORS
from specpair.load.runbooks import (
    GENERATED_DIR,
    LOCK_NAME,
    discover,
    load_latest_measurement,
    load_lock,
    load_runbook,
)
from specpair.load.staging_log import load_records
from specpair.model.errors import Location, Problem, SpecpairError
from specpair.resolve.pair import ResolvedPair, resolve
from specpair.write import writer


@dataclass(frozen=True)
class BuildResult:
    pairs: list[ResolvedPair]
    drift: writer.Drift


def _display(root: Path, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def load_pairs(root: Path, paths: list[Path] | None = None) -> list[ResolvedPair]:
    """Load and resolve runbooks (all under root/runbooks by default), or fail with all problems."""
    files = discover(paths or [root / "runbooks"])
    problems: list[Problem] = []
    pairs: list[ResolvedPair] = []
    seen: dict[str, str] = {}
    for path in files:
        display = _display(root, path)
        try:
            loaded = load_runbook(path, display)
            lock, _ = load_lock(loaded.folder, _display(root, loaded.folder / LOCK_NAME))
            pair = resolve(loaded, lock, _display(root, loaded.folder / LOCK_NAME), display,
                           load_latest_measurement(loaded.folder), load_records(loaded.folder))
        except SpecpairError as exc:
            problems.extend(exc.problems)
            continue
        if pair.name in seen:
            problems.append(Problem(Location(display, 0, 0, "pair.name"),
                                    f"pair {pair.name!r} is also defined in {seen[pair.name]}",
                                    "each pair has one runbook"))
            continue
        seen[pair.name] = display
        pairs.append(pair)
    if problems:
        raise SpecpairError(problems)
    return pairs


def render(root: Path, pairs: list[ResolvedPair]) -> writer.Outputs:
    outputs = writer.Outputs()
    for tree_generator in TREE_GENERATORS:
        for rel, content in tree_generator(pairs).items():
            outputs.add(rel, content)
    runbooks_dir = (root / "runbooks").resolve()
    problems: list[Problem] = []
    for pair in pairs:
        folder = Path(_display(root, runbooks_dir / pair.name)) / GENERATED_DIR
        outputs.owned_dirs.add(folder)
        analysis = Analysis(pair)  # one per pair: every generator reads the same numbers
        try:
            for pair_generator in PAIR_GENERATORS:
                for name, content in pair_generator(analysis).items():
                    outputs.add(folder / name, content)
        except SpecpairError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SpecpairError(problems)
    return outputs


@contextmanager
def exclusive(root: Path) -> Iterator[None]:
    """Serialise concurrent builds of one tree (flock on the runbooks folder itself)."""
    target = root / "runbooks"
    fd = os.open(target if target.is_dir() else root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def build(root: Path, *, check_only: bool = False) -> BuildResult:
    with exclusive(root):
        pairs = load_pairs(root)
        outputs = render(root, pairs)
        drift = writer.compare(root, outputs) if check_only else writer.write(root, outputs)
    return BuildResult(pairs, drift)
