"""Which repository a command works on, from where it is run."""

from __future__ import annotations

from pathlib import Path

from specpair.commands.cli.common import find_root


def test_a_specpair_toml_is_a_root_even_inside_another_runbook_tree(tmp_path: Path) -> None:
    # a team repository just initialised, with no pair yet, inside a checkout that has
    # runbooks (CI's scratch folders sit inside the clone under test)
    (tmp_path / "runbooks").mkdir()
    team = tmp_path / "scratch" / "team-runbooks"
    (team / "site").mkdir(parents=True)
    assert find_root(team / "site") == tmp_path
    (team / "specpair.toml").write_text("[specpair]\n")
    assert find_root(team / "site") == team
    assert find_root(tmp_path / "scratch") == tmp_path

