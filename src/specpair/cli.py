"""The `specpair` command. Wiring only: the top-level parser, the dispatch to the command's
module (specpair/commands/cli/, one per command: its parser and its handler), and the one
place an error becomes the message and exit status the user sees."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from specpair import __version__
from specpair.commands.cli import (
    bench,
    budget,
    build,
    calibrate,
    canary,
    check,
    impact,
    init,
    lock,
    plan,
    schema,
    site,
    slo,
    staging,
    validate,
    verify,
)
from specpair.commands.cli.common import EXIT_PROBLEMS, UsageError
from specpair.model.errors import SpecpairError
from specpair.write.streams import PipeGuard

COMMANDS = (init, validate, build, check, verify, impact, bench, canary, slo, plan, staging,
            site, lock, calibrate, budget, schema)
"""In the order `specpair --help` lists them."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="specpair", description=(
        "Runbook-as-code for speculative decoding: one typed spec per target/draft pair."))
    top.add_argument("--version", action="version", version=f"specpair {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return top


def report(exc: UsageError | SpecpairError | OSError) -> int:
    """The one error formatter: what the user reads on stderr, and the exit status."""
    if isinstance(exc, UsageError):  # found after parsing; worded as argparse words its own
        print(f"specpair {exc.command}: error: {exc.message}", file=sys.stderr)
        return 2
    if isinstance(exc, SpecpairError):
        print(exc.render(), file=sys.stderr)
        return EXIT_PROBLEMS
    from specpair.load.file_policy import io_error  # an I/O failure the library did not locate

    print(io_error(exc.filename or "specpair", exc, "complete the command").render(),
          file=sys.stderr)
    return EXIT_PROBLEMS


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out, err = PipeGuard(sys.stdout), PipeGuard(sys.stderr)  # also `2>&1 | head`
    sys.stdout, sys.stderr = out, err
    try:
        status = int(args.func(args))
    except (UsageError, SpecpairError, OSError) as exc:
        status = report(exc)
    except KeyboardInterrupt:
        status = 130
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = out.inner, err.inner
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
