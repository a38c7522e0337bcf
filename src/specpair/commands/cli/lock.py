"""`specpair lock [--declare]`: the command line of the lock (commands/lock.py, lock/declare.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    PATHS_HELP,
    byte_count,
    paths_of,
)
from specpair.model.errors import SpecpairError

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("lock", help="resolve both artifacts into lock.json (no weight download)")
    p.add_argument("paths", nargs="*", help=PATHS_HELP)
    p.add_argument("--refresh", action="store_true", help="follow branches that have moved")
    p.add_argument("--offline", action="store_true",
                   help="ask no hub (also HF_HUB_OFFLINE=1); local checkpoints still resolve")
    p.add_argument("--declare", action="store_true",
                   help="write a declared lock for one runbook from config.json files and "
                        "declared sizes, every fact listed as unconfirmed (no hub, no weights)")
    p.add_argument("--target-config", help="--declare: the target's config.json")
    p.add_argument("--target-bytes", type=byte_count, help="--declare: the target's weight bytes")
    p.add_argument("--draft-config", help="--declare: the draft's config.json")
    p.add_argument("--draft-bytes", type=byte_count,
                   help="--declare: the draft's weight bytes (a draft bundled in the target "
                        "needs none: its weights are inside the target's; given, they are "
                        "the bundled layers' share)")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands.lock import lock_all
    from specpair.load.runbooks import discover, load_runbook

    if args.declare:
        return _declare(args)
    paths = discover(paths_of(args))
    loaded, failed = [], 0
    for path in paths:
        try:
            loaded.append(load_runbook(path))
        except SpecpairError as exc:
            failed += 1
            print(exc.render(), file=sys.stderr)
    outcomes = lock_all(loaded, refresh=args.refresh, offline=args.offline)
    for outcome in outcomes:
        name = outcome.runbook.name
        for problem in outcome.problems:
            print(problem.render(), file=sys.stderr)
        for drift in outcome.drift:
            print(f"{name}: drift: {drift}" + ("" if args.refresh else
                  " (kept the locked commit; --refresh follows it)"), file=sys.stderr)
        if not outcome.problems:
            print(f"{name}: {'lock written' if outcome.written else 'lock unchanged'}")
    failed += sum(1 for o in outcomes if o.problems)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _declare(args: argparse.Namespace) -> int:
    from specpair.generate.render import dump_json
    from specpair.load.runbooks import LOCK_NAME, discover, load_runbook
    from specpair.lock.declare import declare
    from specpair.write.writer import atomic_write

    paths = discover(paths_of(args))
    if len(paths) != 1 or args.target_config is None or args.target_bytes is None:
        raise SpecpairError.single(
            "--declare", "a declared lock is written for one runbook at a time, from the "
            "target's config.json and weight bytes",
            "specpair lock --declare runbooks/<pair>/runbook.yaml --target-config "
            "PATH/config.json --target-bytes N [--draft-config PATH/config.json "
            "--draft-bytes N]")
    loaded = load_runbook(paths[0])
    lock = declare(loaded, Path(args.target_config), args.target_bytes,
                   Path(args.draft_config) if args.draft_config else None, args.draft_bytes)
    atomic_write(loaded.folder / LOCK_NAME, dump_json(lock.model_dump(
        mode="json", exclude_none=True)))
    facts = sorted({f"{role}.{u}" for role in ("target", "draft")
                    if (art := getattr(lock, role)) is not None for u in art.unconfirmed})
    print(f"{loaded.name}: declared lock written to {loaded.folder / LOCK_NAME}; "
          f"unconfirmed until `specpair lock` resolves them: {', '.join(facts)}")
    return EXIT_OK
