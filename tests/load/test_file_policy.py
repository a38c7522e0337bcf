"""The file policy against links a pull request can commit: every case here wrote, pruned or
echoed through a link (or crashed) before the policy existed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from specpair.cli import main
from specpair.commands.impact import impact
from specpair.load import file_policy
from specpair.model.errors import SpecpairError
from tests.support.paths import REPO

SECRET = "ghs_t o k e n_0123456789abcdef"  # spaced like a token that defeats log masking
PAIR = "llama31-8b-eagle3"  # a Jsonnet runbook
YAML_PAIR = "deepseek-v3-mtp"


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def cli(root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        *args: str) -> tuple[int, str]:
    monkeypatch.chdir(root)
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out + out.err


@pytest.fixture
def repo(repo_copy: Path) -> Path:
    """A copy with a fake git folder beside runbooks/ and a secret in it."""
    git = repo_copy / ".git"
    (git / "objects").mkdir(parents=True)
    for i in range(20):
        (git / "objects" / f"o{i}").write_text(f"object {i}\n")
    (git / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {SECRET}\n")
    return repo_copy


def test_generated_linked_to_git_is_refused_and_git_is_untouched(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    generated = repo / "runbooks" / PAIR / "generated"
    shutil.rmtree(generated)
    generated.symlink_to("../../.git")
    before = digest(repo / ".git")
    for command in (["build"], ["build", "--check"], ["site"], ["validate"], ["check"]):
        status, output = cli(repo, capsys, monkeypatch, *command)
        assert status == 1, (command, output)
        assert f"runbooks/{PAIR}/generated" in output and "symbolic link" in output, output
    assert digest(repo / ".git") == before  # nothing written, nothing pruned


def test_a_linked_site_folder_is_refused(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "site" / "docs").mkdir(parents=True)
    (repo / "site" / "docs" / "pairs").symlink_to("../../.git")
    before = digest(repo / ".git")
    status, output = cli(repo, capsys, monkeypatch, "site")
    assert status == 1 and "site/docs/pairs" in output and "symbolic link" in output, output
    assert digest(repo / ".git") == before


def test_a_linked_jsonnet_runbook_cannot_move_the_import_root(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # the runbook at the repository root imports .git/config relative to itself; linked
    # from runbooks/<pair>/, it used to evaluate with the root as its import root
    (repo / "evil.jsonnet").write_text("{pair: {name: importstr '.git/config'}}\n")
    runbook = repo / "runbooks" / PAIR / "runbook.jsonnet"
    runbook.unlink()
    runbook.symlink_to("../../evil.jsonnet")
    for command in (["validate"], ["check"], ["build", "--check"]):
        status, output = cli(repo, capsys, monkeypatch, *command)
        assert status == 1, output
        assert "symbolic link" in output and SECRET not in output, output


def test_a_jsonnet_import_through_a_link_inside_runbooks_is_refused(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "runbooks" / "lib" / "cfg.libsonnet").symlink_to("../../.git/config")
    runbook = repo / "runbooks" / PAIR / "runbook.jsonnet"
    runbook.write_text("local c = importstr '../lib/cfg.libsonnet';\n"
                       + runbook.read_text().replace("pair: {", "pair: { description: c,", 1))
    status, output = cli(repo, capsys, monkeypatch, "validate",
                         f"runbooks/{PAIR}/runbook.jsonnet")
    assert status == 1 and "symbolic link" in output and SECRET not in output, output


@pytest.mark.parametrize("rel", [f"runbooks/{YAML_PAIR}/runbook.yaml",
                                 f"runbooks/{YAML_PAIR}/lock.json",
                                 f"runbooks/{YAML_PAIR}/measurements/20260101T000000Z.json",
                                 f"runbooks/{YAML_PAIR}/measurements/staging/20260101T0.json"])
def test_a_file_linked_to_a_token_is_never_echoed(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        rel: str) -> None:
    token = repo.parent / "token"
    token.write_text(SECRET + "\n")
    link = repo / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(token)
    for command in (["validate"], ["build"], ["check"], ["site"]):
        status, output = cli(repo, capsys, monkeypatch, *command)
        assert status == 1, (command, output)
        assert SECRET not in output and "symbolic link" in output, (command, output)


def test_a_linked_pair_folder_writes_nothing_outside(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    outside = repo.parent / "outside"
    shutil.move(repo / "runbooks" / YAML_PAIR, outside)
    (repo / "runbooks" / YAML_PAIR).symlink_to(outside)
    shutil.rmtree(outside / "generated")
    status, output = cli(repo, capsys, monkeypatch, "build")
    assert status == 1 and f"runbooks/{YAML_PAIR}" in output and "symbolic link" in output
    assert not (outside / "generated").exists()


def test_reads_are_bounded_on_the_descriptor(tmp_path: Path) -> None:
    # /dev/zero and a FIFO are not regular files: refused before any read (a FIFO with no
    # writer would block an open without O_NONBLOCK)
    with pytest.raises(SpecpairError, match="a device, not a regular file"):
        file_policy.read_bytes(Path("/dev/zero"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SpecpairError, match="a named pipe"):
        file_policy.read_bytes(fifo)
    with pytest.raises(SpecpairError, match="a folder"):
        file_policy.read_bytes(tmp_path)
    # /proc files report st_size 0 yet hold bytes: only the bounded read catches them
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(SpecpairError, match="over 16 bytes"):
        file_policy.read_bytes(Path("/proc/self/status"), limit=16)


def test_a_runbook_linked_to_dev_zero_is_refused(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    runbook = repo / "runbooks" / YAML_PAIR / "runbook.yaml"
    runbook.unlink()
    runbook.symlink_to("/dev/zero")
    status, output = cli(repo, capsys, monkeypatch, "validate")
    assert status == 1 and "symbolic link" in output


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                   check=True, capture_output=True)


def test_impact_survives_links_in_either_revision(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(REPO / "runbooks", root / "runbooks")
    for path in root.glob("runbooks/*/generated"):
        shutil.rmtree(path)
    (root / "runbooks" / "out").symlink_to("/etc")  # a link out of the tree, in the base
    (root / "runbooks" / YAML_PAIR / "notes.txt").symlink_to("../../../../etc/passwd")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    impacts, problems = impact(root, "HEAD", "HEAD")
    assert impacts == []
    links = [p for p in problems if "symbolic link" in p]
    assert len(links) == 2 and any("runbooks/out" in p for p in links), problems
    # the next pull request removes the links: the base's links do not fail it
    (root / "runbooks" / "out").unlink()
    (root / "runbooks" / YAML_PAIR / "notes.txt").unlink()
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "fix")
    impacts, problems = impact(root, "HEAD~1", "HEAD")
    assert problems == [] and impacts == []


def test_pruning_never_descends_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    owned = tmp_path / "runbooks" / "p" / "generated"
    owned.mkdir(parents=True)
    (owned / "sub").symlink_to(victim)
    found = list(file_policy.walk_files(owned))
    assert found == [owned / "sub"]  # the link itself, never victim/keep
    with pytest.raises(SpecpairError, match="symbolic link"):
        file_policy.check_tree(tmp_path)
    assert (victim / "keep").exists()


# ------------------------------------------------- writes under the policy (issue 52)


@pytest.mark.parametrize("linked", [".github", ".github/workflows", "site"])
def test_init_refuses_a_linked_folder_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        linked: str) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    outside.mkdir()
    (repo / linked).parent.mkdir(parents=True)
    (repo / linked).symlink_to(outside)
    status, output = cli(repo, capsys, monkeypatch, "init")
    assert status == 1 and f"{linked}: a symbolic link (to {outside})" in output, output
    assert "never writes through a symbolic link" in output
    assert list(outside.iterdir()) == [] and not (repo / "specpair.toml").exists()


def test_init_force_never_replaces_a_file_outside_the_repository(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (outside / "workflows").mkdir(parents=True)
    (outside / "workflows" / "specpair.yml").write_text(SECRET)
    repo.mkdir()
    (repo / ".github").symlink_to(outside)
    status, output = cli(repo, capsys, monkeypatch, "init", "--force")
    assert status == 1 and ".github: a symbolic link" in output, output
    assert (outside / "workflows" / "specpair.yml").read_text() == SECRET


@pytest.mark.parametrize("rel", ["site/mkdocs.yml", ".gitignore", "specpair.toml",
                                 f"runbooks/{YAML_PAIR}/runbook.yaml"])
@pytest.mark.parametrize("force", [False, True])
def test_init_neither_reads_nor_replaces_a_linked_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        rel: str, force: bool) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside.txt"
    outside.write_text(SECRET)
    (repo / rel).parent.mkdir(parents=True)
    (repo / rel).symlink_to(outside)
    status, output = cli(repo, capsys, monkeypatch, "init", *(["--force"] if force else []))
    assert status == 1 and f"{Path(rel).name}: a symbolic link (to {outside})" in output, \
        output
    assert outside.read_text() == SECRET and SECRET not in output
    assert (repo / rel).is_symlink() and not (repo / "site/docs/index.md").exists()


@pytest.fixture
def team(tmp_path: Path, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository as `specpair init` scaffolds it, committed."""
    repo = tmp_path / "team"
    repo.mkdir()
    assert cli(repo, capsys, monkeypatch, "init")[0] == 0
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "init")
    return repo


@pytest.mark.parametrize("command", [["check", "--format", "sarif"],
                                     ["impact", "--base", "HEAD", "--head", "HEAD"]])
@pytest.mark.parametrize("where", ["linked file", "linked folder"])
def test_output_never_writes_through_a_committed_link(
        team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, command: list[str], where: str) -> None:
    victim = tmp_path / "victim"
    if where == "linked file":
        victim.write_text(SECRET)
        (team / "report.out").symlink_to(victim)
        name = "report.out"
    else:
        victim.mkdir()
        (team / "reports").symlink_to(victim)
        name = "reports/report.out"
    status, output = cli(team, capsys, monkeypatch, *command, "--output", name)
    assert status == 1 and "a symbolic link (to" in output, output
    assert "never writes through a symbolic link" in output
    if where == "linked file":
        assert victim.read_text() == SECRET and (team / "report.out").is_symlink()
    else:
        assert list(victim.iterdir()) == []
    # a real path is written as before, atomically
    status, output = cli(team, capsys, monkeypatch, *command, "--output", "real.out")
    assert status == 0 and (team / "real.out").stat().st_size > 0, output


def test_a_linked_report_output_is_refused_and_its_target_untouched(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`check --output` wrote through a link (Path.write_text follows it): a report named
    by a workflow could overwrite the checkout's git config with the SARIF log."""
    report = repo / "report.sarif"
    report.symlink_to(".git/config")
    before = digest(repo / ".git")
    status, output = cli(repo, capsys, monkeypatch, "check", "--format", "sarif", "--output",
                         "report.sarif")
    assert status == 1, output
    assert "report.sarif" in output and "symbolic link (to .git/config)" in output, output
    assert report.is_symlink() and os.readlink(report) == ".git/config"
    assert digest(repo / ".git") == before
