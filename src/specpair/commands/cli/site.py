"""`specpair site`: the command line of the site pages (commands/site.py)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, ROOT_HELP, root_of
from specpair.model.errors import SpecpairError

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("site", help="generate the MkDocs pages under site/docs/pairs/")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--changes-base", help="git revision for each pair's change checklist")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.commands import site
    from specpair.commands.build import exclusive, load_pairs
    from specpair.write import writer

    root = root_of(args)
    changes = {}
    if args.changes_base:
        try:
            changes = site.changes_by_pair(root, args.changes_base)
        except SpecpairError as exc:
            print(f"change checklists skipped: {exc.problems[0].message}", file=sys.stderr)
    with exclusive(root):
        outputs = site.render(load_pairs(root), changes, cache=root / "site" / ".cache")
        drift = writer.write(root, outputs)
    print(f"site pages: {len(outputs.files)} file(s), {len(drift.stale)} updated")
    return EXIT_OK
