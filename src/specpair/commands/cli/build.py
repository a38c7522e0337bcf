"""`specpair build [--check]`: the command line of the build (commands/build.py)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, EXIT_STALE, ROOT_HELP, root_of

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("build", help="regenerate every output from runbooks and locks")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 3 and list the files a build would change")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands.build import build

    root = root_of(args)
    result = build(root, check_only=args.check)
    stale = result.drift.stale
    if args.check:
        if stale:
            from specpair.load.project import commands

            print(f"generated files are stale; run `{commands(root).build}` and commit the "
                  "result:", file=sys.stderr)
            for rel in stale:
                why = ("missing" if rel in result.drift.missing else
                       "no longer generated" if rel in result.drift.orphaned else "differs")
                print(f"  {rel} ({why})", file=sys.stderr)
            return EXIT_STALE
        print(f"{len(result.pairs)} pair(s): generated files are up to date")
        return EXIT_OK
    print(f"{len(result.pairs)} pair(s) built; {len(stale)} file(s) updated")
    for rel in stale:
        print(f"  {rel}")
    return EXIT_OK
