"""`specpair verify [PATHS]`: each pair's KV sizing put to its pinned release's own code."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, EXIT_PROBLEMS, PATHS_HELP, ROOT_HELP, root_of

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "verify", help="put each pair's KV sizing to its pinned engine release's own code "
        "(on the CPU) and compare it with specpair's budget",
        description="Runs the release's own KV sizing (its config reading, layer specs and "
        "pool planning) on the pair's config.json files, for the bytes the budget found, "
        "and prints specpair's figures beside the engine's. Exit status 0: every pair "
        "confirmed; 1: a figure differs or the engine refused.")
    p.add_argument("paths", nargs="*", help=PATHS_HELP)
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--engine-python", metavar="PYTHON",
                   help="an interpreter that imports the engine (default: "
                        "SPECPAIR_ENGINE_PYTHON); SPECPAIR_ENGINE_<NAME>_<VERSION> names a "
                        "folder of one release's package to put first on its path")
    p.add_argument("--target-config", metavar="FILE",
                   help="the target's config.json (or its folder), where the runbook's "
                        "checkpoint is not at hand")
    p.add_argument("--draft-config", metavar="FILE", help="the draft's config.json")
    p.add_argument("--offline", action="store_true",
                   help="ask no hub: configs from local folders and the hub cache only "
                        "(also HF_HUB_OFFLINE=1)")
    p.add_argument("--record", action="store_true",
                   help="write the engine's answer into each pair's lock.json: `build` then "
                        "says the budget is confirmed by the release's code (or where it "
                        "differs) for as long as the question stays the same")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from specpair.commands.lock import offline_requested
    from specpair.commands.verify import record, run
    from specpair.generate.verify_report import as_json, markdown

    root = root_of(args)
    paths = [Path(p) for p in args.paths] if args.paths else [root / "runbooks"]
    results = run(root, paths, args.engine_python, args.target_config, args.draft_config,
                  offline_requested(args.offline))
    sys.stdout.write(as_json(results) if args.json else markdown(results))
    if args.record:
        for written in record(root, results):
            print(f"recorded the engine's answer in {written}", file=sys.stderr)
    return EXIT_OK if all(v.confirmed for v in results) else EXIT_PROBLEMS
