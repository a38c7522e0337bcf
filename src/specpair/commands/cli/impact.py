"""`specpair impact`: the command line of the change report (commands/impact.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, EXIT_STALE, ROOT_HELP, root_of

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers

IMPACT_CLASSES = ("any", "target", "draft", "both", "deployment", "engine", "slo", "staging",
                  "speculation", "codesign", "workloads", "waivers", "metadata", "added",
                  "removed", "renamed", "invalid", "stale-lock")


def _classes(text: str) -> set[str]:
    """--fail-on: a typo must be a usage error, not a silently ignored class."""
    given = {c.strip() for c in text.split(",") if c.strip()}
    unknown = sorted(given - set(IMPACT_CLASSES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown class(es) {', '.join(map(repr, unknown))}; choose from "
            + ", ".join(IMPACT_CLASSES))
    return given


def register(sub: Subparsers) -> None:
    p = sub.add_parser("impact", help="what a change obliges reviewers to re-check")
    p.add_argument("--base", required=True, help="git revision to compare from")
    p.add_argument("--head", help="git revision to compare to (default: the working tree)")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--output", help="write the report to this file")
    p.add_argument("--fail-on", type=_classes, default={"invalid"},
                   help="comma-separated classes that exit 3 (default: invalid, which a stale "
                   "lock is; '' for none): " + ", ".join(IMPACT_CLASSES))
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands import impact
    from specpair.load.file_policy import atomic_write

    impacts, problems = impact.impact(root_of(args), args.base, args.head)
    rendered = impact.as_json(impacts, problems) if args.format == "json" else \
        impact.markdown(impacts, problems, args.base, args.head)
    if args.output:  # never through a link, as for `check --output`
        atomic_write(Path(args.output), rendered.encode("utf-8"), root=Path.cwd())
    else:
        sys.stdout.write(rendered)
    fail_on: set[str] = args.fail_on
    hit = {c for i in impacts for c in i.classes} | ({"invalid"} if problems else set())
    if "any" in fail_on and hit - {"metadata", "waivers"}:
        return EXIT_STALE
    return EXIT_STALE if fail_on & hit else EXIT_OK
