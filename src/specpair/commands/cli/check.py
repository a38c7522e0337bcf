"""`specpair check`: the command line of the gate's report (commands/check.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    PATHS_HELP,
    ROOT_HELP,
    paths_of,
    root_of,
)

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("check", help="the pre-deployment gate: pair and co-design rules")
    p.add_argument("paths", nargs="*", help=PATHS_HELP)
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--format", choices=["text", "json", "sarif", "markdown"], default="text")
    p.add_argument("--output", help="write the report to this file")
    p.add_argument("--strict", action="store_true", help="unwaived warnings fail too")
    p.add_argument("--hub", action="store_true", help="also ask the hub whether locked "
                                                      "branches moved (SP103)")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.analyse.checks.gate import failing
    from specpair.commands import check
    from specpair.load.file_policy import atomic_write

    reports = check.check(root_of(args), paths_of(args), hub=args.hub)
    rendered = {"text": lambda: check.text(reports, args.strict),
                "json": lambda: check.as_json(reports), "sarif": lambda: check.sarif(reports),
                "markdown": lambda: check.markdown(reports, args.strict)}[args.format]()
    if args.output:  # never through a link: it could write over any file of the runner
        atomic_write(Path(args.output), rendered.encode("utf-8"), root=Path.cwd())
        print(check.text(reports, args.strict).splitlines()[-1])
    else:
        sys.stdout.write(rendered)
    failed = sum(len(failing(r.findings, args.strict)) for r in reports)
    return EXIT_PROBLEMS if failed else EXIT_OK
