"""`specpair staging ingest|calibrate`: the command line of the recorded cold starts
(commands/staging_ingest.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, ROOT_HELP, one_pair, root_of

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("staging", help="recorded cold starts: ingest a deployment log, "
                                        "calibrate the staging model")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("ingest", help="store the log of stage-and-launch.sh (or of the "
                                          "manifest's containers) under measurements/staging/")
    q.add_argument("runbook", help="runbook file")
    q.add_argument("log", help="the deployment log (its stdout, or `kubectl logs`)")
    q.add_argument("--engine-log", help="the engine's own log ($LOG of the script): splits "
                                        "the engine start into weight load and graph capture")
    q.add_argument("--root", help=ROOT_HELP)
    q.set_defaults(func=handle)
    q = actions.add_parser("calibrate", help="staging assumptions from the recorded starts, "
                                             "with their provenance")
    q.add_argument("runbook", help="runbook file")
    q.add_argument("--root", help=ROOT_HELP)
    q.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands.staging_ingest import calibrate_text, ingest

    if args.action == "ingest":
        from specpair.commands.build import exclusive

        with exclusive(root_of(args)):  # it writes generated files, like a build
            text = ingest(one_pair(root_of(args), args.runbook), Path(args.runbook),
                          Path(args.log), Path(args.engine_log) if args.engine_log else None)
        print(text, end="")
    else:
        print(calibrate_text(one_pair(root_of(args), args.runbook)), end="")
    return EXIT_OK
