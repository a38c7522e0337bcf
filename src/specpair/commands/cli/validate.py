"""`specpair validate [PATHS]`: check runbooks against the spec; report all problems."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, EXIT_PROBLEMS, PATHS_HELP, paths_of
from specpair.model.errors import SpecpairError

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("validate", help="check runbooks against the spec; report all problems")
    p.add_argument("paths", nargs="*", help=PATHS_HELP)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands.check import engine_refusals
    from specpair.load.runbooks import discover, load_runbook

    paths = discover(paths_of(args))
    if not paths:
        print("no runbooks found", file=sys.stderr)
        return EXIT_PROBLEMS
    failed = 0
    for path in paths:
        try:
            refusals = engine_refusals(load_runbook(path), str(path))
            if refusals:  # valid YAML, but an engine would refuse to start it
                raise SpecpairError(refusals)
        except SpecpairError as exc:
            failed += 1
            print(exc.render(), file=sys.stderr)
    print(f"{len(paths) - failed} of {len(paths)} runbook(s) valid",
          file=sys.stderr if failed else sys.stdout)
    return EXIT_PROBLEMS if failed else EXIT_OK
