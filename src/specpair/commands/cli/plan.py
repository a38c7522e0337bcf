"""`specpair plan`: the command line of the deployment search (analyse/plan.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    ROOT_HELP,
    UsageError,
    one_pair,
    positive,
    root_of,
)

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def _gpu_list(text: str) -> tuple[str, ...]:
    """--gpus: catalog keys and `common`, comma-separated; a typo is a usage error."""
    from specpair.analyse.plan.options import PlanError, expand_gpus

    try:
        found = expand_gpus([g for g in text.split(",") if g.strip()])
    except PlanError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not found:
        raise argparse.ArgumentTypeError("name at least one GPU (or `common`)")
    return found


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def register(sub: Subparsers) -> None:
    p = sub.add_parser("plan", help="search deployments of a pair: GPU, TP, KV dtype, memory "
                                     "fraction, draft depth or no draft; rank them")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--gpus", type=_gpu_list, help="comma-separated GPU catalog keys, or "
                   "`common` (default: the runbook's GPU)")
    p.add_argument("--max-gpus", type=positive, help="GPUs per replica and in all "
                   "(default: the runbook's gpus_per_node)")
    p.add_argument("--tpot-ms", type=_positive_float, help="time per output token target")
    p.add_argument("--ttft-ms", type=_positive_float, help="time to first token target")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=positive, help="sequences in flight per "
                      "replica (default: the runbook's expected concurrency, else the most "
                      "each deployment holds)")
    load.add_argument("--rate", type=_positive_float, help="requests per second to serve "
                      "with the fewest GPUs")
    p.add_argument("--top", type=positive, default=10, help="rows to show (default 10)")
    p.add_argument("--json", action="store_true", help="the whole plan as JSON")
    p.add_argument("--write", action="store_true", help="apply the recommendation to the "
                   "runbook in place, keeping comments and order")
    p.add_argument("--root", help=ROOT_HELP)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.analyse.plan.options import Options, PlanError, Targets
    from specpair.analyse.plan.search import plan
    from specpair.generate import plan_report

    root = root_of(args)
    pair = one_pair(root, args.runbook)
    opts = Options(gpus=args.gpus or (), max_gpus=args.max_gpus, top=args.top,
                   targets=Targets(tpot_ms=args.tpot_ms, ttft_ms=args.ttft_ms,
                                   concurrency=args.concurrency, rate=args.rate))
    try:
        result = plan(pair, opts)
    except PlanError as exc:
        raise UsageError("plan", str(exc)) from None
    if args.json:
        sys.stdout.write(plan_report.as_json(result))
    else:
        sys.stdout.write(plan_report.markdown(result, args.top))
    best = result.recommended  # the best, or fewer changes the model cannot tell from it
    if best is None:
        return EXIT_PROBLEMS
    if best.depth == 0 or not best.changes:
        if args.write:
            print("\n--write: nothing to write (see the recommendation above)", file=sys.stderr)
        return EXIT_OK
    from specpair.load.runbook_edit import Change, plan_edit
    from specpair.load.runbooks import discover
    from specpair.write.runbook_edit import write_edit

    path = Path(args.runbook)
    if path.is_dir():
        (path,) = discover([path])
    edit = plan_edit(path, pair.source_file, [
        Change(tuple(k.split(".")), v) for k, v in best.changes.items()])
    out = sys.stderr if args.json else sys.stdout
    if not args.write:
        print("\nThe recommendation as a runbook patch (`--write` applies it):\n", file=out)
        print(edit.diff, end="", file=out)
        return EXIT_OK
    if not edit.applied:
        print("\n--write: not applied in place (" + "; ".join(edit.reasons) + "); apply this "
              "patch by hand:\n", file=out)
        print(edit.diff, end="", file=out)
        return EXIT_OK
    write_edit(edit)
    print(f"\n--write: {pair.source_file} updated; run `specpair build` to regenerate its "
          "outputs:\n", file=out)
    print(edit.diff, end="", file=out)
    return EXIT_OK
