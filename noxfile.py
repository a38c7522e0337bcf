"""The development workflow of specpair; each session is one step a person or CI runs.

    nox -s build     regenerate every output from runbooks/ (offline)
    nox -s check     fail when committed outputs are stale or a runbook is invalid
    nox -s tests     the test suite
    nox -s lint      ruff + mypy on src/
"""

from __future__ import annotations

import nox

nox.options.sessions = ["build"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints.txt")


def _install(session: nox.Session, extras: str = "") -> None:
    target = f".[{extras}]" if extras else "."
    session.install(*CONSTRAINTS, target)


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Validate every runbook and regenerate launch configs, budgets, schema and pages."""
    _install(session)
    session.run("specpair", "build")


@nox.session(python=PYTHON)
def check(session: nox.Session) -> None:
    """Fail (and list the files) when committed outputs differ from a fresh build."""
    _install(session)
    session.run("specpair", "validate", "runbooks")
    session.run("specpair", "build", "--check")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (no network: hub, git and browser tests use local servers)."""
    _install(session, "test")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (style, imports, bugbear) and mypy --strict on the package."""
    _install(session, "lint")
    session.run("ruff", "check", "src", "tests", "benchmarks", "tools", "noxfile.py")
    session.run("mypy")
