"""`specpair calibrate`: fit the pair's step costs on its bench records."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, ROOT_HELP, one_pair, root_of
from specpair.model.errors import SpecpairError

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("calibrate", help="fit the pair's step costs on its bench records")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--concurrency", help="fit only on these levels, e.g. 1,2 (default: all); "
                                         "the others are predicted")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.analyse.budget import compute
    from specpair.analyse.calibrate import fit_pair, markdown

    pair = one_pair(root_of(args), args.runbook)
    if pair.measurement is None:
        raise SpecpairError.single(args.runbook, "the pair has no bench record",
                                   "run `specpair bench` first (it writes measurements/)")
    levels = ({int(c) for c in args.concurrency.split(",") if c.strip()}
              if args.concurrency else None)
    fitted = fit_pair(pair, compute(pair), pair.measurement, levels)
    if fitted is None:
        raise SpecpairError.single(args.runbook, "no usable cell at those concurrencies "
                                   "(failed requests or no acceptance counters)",
                                   "pick concurrencies the record holds")
    print(markdown(fitted), end="")
    return EXIT_OK
