"""What the command-line modules share: exit statuses, the repository root, the one pair
a command works on, help texts and argument types.

Imports of the library stay inside the functions, as in every module of this package, so
`specpair --help` and a usage error load no model.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.model.errors import SpecpairError

if TYPE_CHECKING:
    from specpair.resolve.pair import ResolvedPair

EXIT_OK, EXIT_PROBLEMS, EXIT_STALE = 0, 1, 3

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

PATHS_HELP = "runbook files or folders (default: the root's runbooks/)"
ROOT_HELP = ("repository root (holds runbooks/); default: the nearest folder upwards from "
             "here that holds runbooks/")


class UsageError(Exception):
    """A usage error found after parsing: `specpair COMMAND: error: MESSAGE`, exit 2."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(message)
        self.command = command
        self.message = message


def find_root(start: Path | None = None) -> Path:
    """The repository root, found as git finds its top level: the nearest folder from
    `start` (the working directory) upwards that holds `runbooks/` or a `specpair.toml`
    (a repository whose first pair is yet to come is still one, and must not borrow the
    runbooks of a tree it sits in). Outside any such tree the working directory itself,
    so errors name the folder the user is in."""
    from specpair.load.project import CONFIG

    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "runbooks").is_dir() or (folder / CONFIG).is_file():
            return folder
    return here


def root_of(args: argparse.Namespace) -> Path:
    from specpair.load.project import load_config

    root = Path(args.root) if getattr(args, "root", None) else find_root()
    load_config(root)  # a pinned release other than this one is refused, by name
    return root


def paths_of(args: argparse.Namespace) -> list[Path]:
    """The paths the user named (relative to where they are), else the root's runbooks/."""
    return [Path(p) for p in args.paths] if args.paths else [root_of(args) / "runbooks"]


def one_pair(root: Path, runbook: str) -> ResolvedPair:
    """The one pair a command about one runbook (budget, plan, bench, …) works on: a
    folder holding several runbooks is a usage error, not an unpacking traceback."""
    from specpair.commands.build import load_pairs

    pairs = load_pairs(root, [Path(runbook)])
    if len(pairs) != 1:
        raise SpecpairError.single(runbook, f"{len(pairs)} runbooks here; this command "
                                   "works on one", "give one runbook file, e.g. "
                                   "runbooks/<pair>/runbook.yaml")
    return pairs[0]


def regenerate(root: Path, runbook: str) -> dict[str, bytes]:
    """Rewrite the generated outputs of one pair (caller holds the build lock); returns
    them by file name."""
    from specpair.commands.build import _display, render
    from specpair.load import file_policy
    from specpair.load.runbooks import GENERATED_DIR
    from specpair.write.writer import atomic_write

    pair = one_pair(root, runbook)
    generated = Path(_display(root, Path(os.path.abspath(runbook)).parent)) / GENERATED_DIR
    written: dict[str, bytes] = {}
    for rel, content in render(root, [pair]).files.items():
        if rel.parent == generated:
            atomic_write(root / rel, content)
            written[rel.name] = content
    # an output the pair no longer has goes, as the build removes it (a schedule that the
    # record turns to K = 0 everywhere has no static-K launch any more)
    for path in sorted((root / generated).iterdir()):
        if path.is_file() and path.name not in written:
            file_policy.remove(path)
    return written


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{value:g} is not between 0 and 1 (exclusive)")
    return value


def byte_count(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("a size in bytes must be positive (a draft bundled "
                                         "in the target needs no --draft-bytes)")
    return value
