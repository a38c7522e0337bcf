"""`.ci/run` is the README's test command, word for word: CI runs what a reader is told to
run, and a change to one without the other fails here."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("Run the tests;"):]
    command = re.search(r"```sh\n(.+?)\n```", section, re.S)
    assert command is not None, "the README's test command is a ```sh block after 'Run the tests;'"
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line and not line.startswith(("#", "set ", "cd "))]
    assert lines == [command.group(1)]
