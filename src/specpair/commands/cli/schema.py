"""`specpair schema [runbook|lock]`: print a JSON Schema derived from the models."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("schema", help="print a JSON Schema derived from the models")
    p.add_argument("which", choices=["runbook", "lock"], nargs="?", default="runbook")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specpair.generate import schema_files

    files = schema_files.generate([])
    sys.stdout.write(files[Path(f"schema/{args.which}.schema.json")].decode())
    return EXIT_OK
