"""The README's own words, read where tests run them or hold the package to them."""

from __future__ import annotations

import re

from tests.support.paths import REPO

ADOPTION = "## Use specpair in your own repository"


def adoption_commands() -> str:
    """The first ```sh block of the README's adoption section, as a user copies it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(ADOPTION):]
    section = section[:section.index("\n## ", len(ADOPTION))]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert block, f"no ```sh block under {ADOPTION!r} in README.md"
    return block.group(1)


def install_line() -> str:
    """The adoption block's `pip install` command, its comment cut off."""
    (line,) = [line for line in adoption_commands().splitlines() if " pip install " in line]
    return line.split("   #", 1)[0].strip()


def install_url() -> tuple[str, str]:
    """The repository URL and the tag of the README's requirement
    (`specpair[site] @ git+URL@TAG`)."""
    match = re.search(r'"specpair\[site\] @ git\+(https://[^"@]+)@([^"]+)"', install_line())
    assert match, install_line()
    return match.group(1), match.group(2)
