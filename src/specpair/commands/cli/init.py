"""`specpair init [DIR]`: the command line of the scaffold (commands/init.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from specpair import __version__
from specpair.commands.cli.common import EXIT_OK

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("init", help="scaffold a runbook repository: specpair.toml, an example "
                                     "pair, the CI gate, the site; never overwrites")
    p.add_argument("dir", nargs="?", default=".", help="the repository (default: here)")
    p.add_argument("--force", action="store_true",
                   help="rewrite files that differ from the templates")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands.init import init

    root = Path(args.dir)
    result = init(root, force=args.force)
    for label, names in (("written", result.written), ("unchanged", result.unchanged)):
        for name in names:
            print(f"  {label:9} {name}")
    for name in result.kept:
        print(f"  kept      {name} (differs from the template; --force rewrites it)")
    for note in result.notes:
        print(f"  note      {note}")
    where = "" if root.resolve() == Path.cwd().resolve() else f"cd {args.dir} && "
    print(f"specpair {__version__} repository in {root}; next: {where}specpair build && "
          "specpair check, then commit (README: \"Use specpair in your own repository\")")
    return EXIT_OK
