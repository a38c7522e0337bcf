"""`specpair bench`: the command line of the measurement protocol (commands/bench.py)
and of its regression gate (`--against`, commands/bench_against.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, ROOT_HELP, one_pair, regenerate, root_of

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers
    from specpair.resolve.pair import ResolvedPair


def _levels(text: str) -> list[int]:
    """--concurrency: positive whole numbers, comma-separated."""
    try:
        levels = sorted({int(c) for c in text.split(",") if c.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers (e.g. 1,4,16)") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError("concurrency levels must be positive, e.g. 1,4,16")
    return levels


def register(sub: Subparsers) -> None:
    p = sub.add_parser("bench", help="run the measurement protocol; write a record and card")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--baseline", required=True, help="URL of the target-only server")
    p.add_argument("--spec", required=True, help="URL of the speculative server")
    p.add_argument("--static", help="under a speculation schedule: URL of the same pair at "
                   "the schedule's largest K without it (generated launch-*-static.sh), "
                   "measured beside the two others; the card says which wins where")
    p.add_argument("--concurrency", type=_levels, default=None,
                   help="comma-separated levels (default 1,4,16; under a speculation "
                   "schedule the concurrencies it switches at, up to the deployment's "
                   "max running requests; with --against the record's)")
    p.add_argument("--time-limit", type=float, default=600.0,
                   help="seconds per run (server × workload × concurrency)")
    p.add_argument("--workloads", type=lambda t: {x for x in t.split(",") if x},
                   help="comma-separated workload names to run (default all)")
    p.add_argument("--against", metavar="RECORD", help="the regression gate: replay the "
                   "record's request sets on this (candidate) deployment and compare per "
                   "class; exits 1 beyond acceptance.regression's tolerances")
    p.add_argument("--sarif", help="with --against: where to write the SARIF log (default "
                   "measurements/against/<UTC time>.sarif)")
    p.add_argument("--root", help=ROOT_HELP)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import datetime as dt

    from specpair.commands.bench import run
    from specpair.commands.build import _display, exclusive
    from specpair.generate.render import dump_json
    from specpair.load.runbooks import MAX_RECORD_BYTES, MEASUREMENTS_DIR
    from specpair.write.writer import write_readable

    root = root_of(args)
    pair = one_pair(root, args.runbook)
    folder = Path(os.path.abspath(args.runbook)).parent
    if args.against:
        from specpair.commands.bench_against import gate

        return gate(pair, folder, Path(args.against), args.baseline.rstrip("/"),
                    args.spec.rstrip("/"), args.concurrency, args.time_limit, args.workloads,
                    Path(args.sarif) if args.sarif else None, _display(root, Path(args.runbook)))
    levels: list[int] = args.concurrency or _bench_levels(pair)
    static = args.static.rstrip("/") if args.static else None
    if static is None and pair.runbook.speculation.schedule is not None:
        print("note: the schedule is not compared with its static K: start the generated "
              "launch-*-static.sh and pass its URL with --static", file=sys.stderr)
    measurement = run(pair, args.baseline.rstrip("/"), args.spec.rstrip("/"), levels,
                      args.time_limit, folder=folder, only=args.workloads, static=static)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    record = folder / MEASUREMENTS_DIR / f"{stamp}.json"
    with exclusive(root):  # a build running meanwhile would write the card of before
        write_readable(record, dump_json(measurement.model_dump(mode="json")),
                       MAX_RECORD_BYTES, "measurement record")
        # the card, break-even (fitted on the latest record) and what follows from it
        # (alert thresholds, dashboards) all change: regenerate every output of this
        # pair, so that `build --check` stays clean after a bench run
        generated = regenerate(root, args.runbook)
    print(f"measurement written to {record}")
    print(generated["card.md"].decode("utf-8"))  # as written, not read back through a link
    return EXIT_OK


def _bench_levels(pair: ResolvedPair) -> list[int]:
    """Without --concurrency: 1, 4, 16; under a speculation schedule the concurrencies it
    switches at (every range's ends, up to what the deployment holds), so the record shows
    each K where the schedule hands over."""
    from specpair.analyse.budget import compute
    from specpair.analyse.schedule import attach, bench_levels, max_batch

    scheduled = attach(pair)
    if scheduled.schedule is None:
        return [1, 4, 16]
    return bench_levels(scheduled.schedule, max_batch(compute(scheduled)))
