"""`specpair canary`: the command line of the canary before traffic (commands/canary.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import ROOT_HELP, one_pair, root_of

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("canary", help="before traffic: replay a pinned request set on a new "
                       "server; exit 4 when speculation does not pay or does not run")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--url", required=True, help="the new server, e.g. http://127.0.0.1:8000")
    p.add_argument("--record", metavar="RECORD", help="a bench record with a replay "
                   "workload: replay its captured classes instead of the synthetic workloads")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--root", help=ROOT_HELP)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands.canary import run

    root = root_of(args)
    pair = one_pair(root, args.runbook)
    folder = Path(os.path.abspath(args.runbook)).parent
    return run(pair, folder, args.url.rstrip("/"), Path(args.record) if args.record else None,
               args.json)
