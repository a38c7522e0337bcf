"""The package as a platform team installs it; collected only by `nox -s install`.

That session serves a bare `git clone` of the working tree, tagged v<version>, and names
it in SPECPAIR_SERVED_CLONE. Here the README's adoption commands run verbatim, from
`python -m venv .venv` to the first commit, with git's config rewriting the README's
repository URL to that clone (`url.<clone>.insteadOf`): the only substitution, so what
is tested is the words a user copies. Dependencies come from the package index pip is
configured with on this machine; the tests then run that `.venv`'s `specpair` and
`mkdocs`, and the session's actionlint (SPECPAIR_ACTIONLINT), and touch no other network.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.install.support import Adopted, Run, Served
from tests.support.readme import adoption_commands, install_url


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    where = os.environ.get("SPECPAIR_SERVED_CLONE")
    if not where or not (Path(where) / "HEAD").is_file():
        pytest.fail("SPECPAIR_SERVED_CLONE must name a bare git clone of this repository "
                    "tagged v<version>: run these tests with `nox -s install`")
    url, tag = install_url()
    gitconfig = tmp_path_factory.mktemp("git") / "gitconfig"
    gitconfig.write_text("[user]\n\tname = specpair-test\n\temail = test@localhost\n"
                         "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n"
                         f'[url "file://{where}"]\n\tinsteadOf = {url}\n')
    return Served(Path(where), url, tag, gitconfig)


@pytest.fixture(scope="session")
def adopted(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Adopted:
    """The README's adoption commands, verbatim, under bash -e in an empty folder, with
    this test's Python as `python` and the machine's own pip configuration."""
    folder = tmp_path_factory.mktemp("adopt")
    tools = folder.parent / f"{folder.name}-tools"
    tools.mkdir()
    (tools / "python").symlink_to(sys.executable)
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PATH=f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin",
               GIT_CONFIG_GLOBAL=str(served.gitconfig), HF_HUB_OFFLINE="1",
               NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           adoption_commands()], cwd=folder, env=env, capture_output=True,
                          text=True, check=False, timeout=1800)
    output = done.stdout + done.stderr
    if done.returncode != 0 or "Traceback" in output:
        pytest.fail(f"the README's adoption commands failed ({done.returncode}):\n"
                    f"{adoption_commands()}\n{output[-6000:]}")
    return Adopted(folder, output)


@pytest.fixture(scope="session")
def fresh(adopted: Adopted) -> Path:
    """The virtual environment the README's commands made and installed specpair into."""
    return adopted.folder / ".venv"


@pytest.fixture(scope="session")
def actionlint() -> Path:
    where = os.environ.get("SPECPAIR_ACTIONLINT")
    if not where or not Path(where).is_file():
        pytest.fail("SPECPAIR_ACTIONLINT must name the actionlint binary: run these tests "
                    "with `nox -s install`")
    return Path(where)


@pytest.fixture
def run(fresh: Path) -> Run:
    """A command of the fresh environment (or a tool given by its path), with only that
    environment and the system's tools on PATH (no PYTHONPATH: the source tree must not
    stand in for the installed package)."""
    def call(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(PATH=f"{fresh / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin",
                   HF_HUB_OFFLINE="1", NO_MKDOCS_2_WARNING="1")
        program = tool if os.path.isabs(tool) else str(fresh / "bin" / tool)
        return subprocess.run([program, *args], cwd=cwd, env=env,
                              capture_output=True, text=True, check=False, timeout=900)
    return call
