"""`specpair slo propose`: the command line of the SLO proposal (commands/slo.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, ROOT_HELP, fraction, one_pair, regenerate, root_of

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("slo", help="the acceptance SLO from your own traffic")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("propose", help="propose min τ at the runbook's scope and "
                           "percentile from the latest replay record or from Prometheus")
    q.add_argument("runbook", help="runbook file")
    q.add_argument("--prometheus", metavar="URL", help="query the pair's τ recording rule "
                   "on this Prometheus server instead of the latest record")
    q.add_argument("--since", default="7d", help="with --prometheus: how far back (7d)")
    q.add_argument("--margin", type=fraction, default=0.05,
                   help="the SLO is the interval's low end less this fraction (0.05)")
    q.add_argument("--write", action="store_true", help="edit the runbook in place: "
                   "min_length, basis own_traffic and the provenance")
    q.add_argument("--root", help=ROOT_HELP)
    q.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands import slo

    root = root_of(args)
    pair = one_pair(root, args.runbook)
    folder = Path(os.path.abspath(args.runbook)).parent
    if args.prometheus:
        proposal = slo.from_prometheus(pair, args.prometheus.rstrip("/"),
                                       slo.duration(args.since), args.margin)
    else:
        record, name = slo.latest_record(folder)
        proposal = slo.from_record(pair, record, name, args.margin)
    print(slo.report(proposal), end="")
    if not args.write:
        return EXIT_OK
    from specpair.commands.build import exclusive

    with exclusive(root):  # the SLO reaches alert rules, dashboards, card: regenerate
        status = slo.write(proposal, Path(args.runbook), args.runbook)
        if status == EXIT_OK:
            regenerate(root, args.runbook)
    return status
