"""`specpair init`: a runbook repository scaffolded from the installed package alone, in
temporary git repositories (the slow end-to-end run from a built wheel is
tests/install/test_install.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from specpair import __version__
from specpair.load.project import PLACEHOLDER_SOURCE, SOURCE_PATTERN, requirement
from tests.support import proc
from tests.support.paths import REPO
from tests.support.readme import install_line, install_url

SCAFFOLD = [".github/workflows/specpair.yml", ".gitignore", "runbooks/deepseek-v3-mtp/lock.json",
            "runbooks/deepseek-v3-mtp/runbook.yaml",
            "site/docs/assets/javascripts/iframe-worker/LICENSE",
            "site/docs/assets/javascripts/iframe-worker/shim.js", "site/docs/index.md",
            "site/docs/stylesheets/specpair.css", "site/mkdocs.yml", "specpair.toml"]


def specpair(root: Path, *args: str, site: Path | None = None
             ) -> subprocess.CompletedProcess[str]:
    """specpair from this source tree; `site`, a folder of distributions, is searched
    first for the installed specpair's metadata (see `installed_as`)."""
    path = [str(site)] if site else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(REPO / "src")]),
           "HF_HUB_OFFLINE": "1"}
    return proc.run([sys.executable, "-m", "specpair", *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False, cpu_s=600)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                          capture_output=True, text=True, check=True).stdout


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "team-runbooks"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def test_init_scaffolds_a_repository_where_every_command_works(repo: Path) -> None:
    result = specpair(repo, "init")
    assert result.returncode == 0, result.stderr
    assert sorted(files(repo)) == SCAFFOLD
    config = (repo / "specpair.toml").read_text()
    assert f'version = "{__version__}"' in config
    lock = json.loads((repo / "runbooks/deepseek-v3-mtp/lock.json").read_text())
    assert lock["target"]["provenance"] == "declared"
    assert lock["draft"]["weights"]["inside_target"] is True
    assert specpair(repo, "build").returncode == 0
    assert specpair(repo, "build", "--check").returncode == 0
    checked = specpair(repo, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "specpair init")
    path = repo / "runbooks/deepseek-v3-mtp/runbook.yaml"
    path.write_text(path.read_text().replace("num_speculative_tokens: 3",
                                             "num_speculative_tokens: 2"))
    stale = specpair(repo, "build", "--check")
    # the command that exists here: no noxfile, so not `nox -s build`
    assert stale.returncode == 3 and "run `specpair build` and commit" in stale.stderr
    assert "nox" not in stale.stderr
    assert specpair(repo, "build").returncode == 0
    git(repo, "commit", "-qam", "depth 2")
    impact = specpair(repo, "impact", "--base", "HEAD~1")
    assert impact.returncode == 0, impact.stderr
    assert "num_speculative_tokens: 3 → 2" in impact.stdout
    site = specpair(repo, "site", "--changes-base", "HEAD~1")
    assert site.returncode == 0 and "skipped" not in site.stderr, site.stderr
    page = (repo / "site/docs/pairs/deepseek-v3-mtp.md").read_text()
    # the change checklist, from git history
    assert "## Change checklist" in page and "Speculation parameters changed" in page
    # everything `site` generates (pages, models, its page cache) is ignored by the
    # .gitignore init wrote, as git reads it
    assert (repo / "site" / ".cache").is_dir()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_init_is_idempotent_and_overwrites_only_with_force(repo: Path) -> None:
    assert specpair(repo, "init").returncode == 0
    first = files(repo)
    again = specpair(repo, "init")
    assert again.returncode == 0 and "written" not in again.stdout
    assert files(repo) == first
    (repo / "site/mkdocs.yml").write_text("site_name: ours\n")
    (repo / ".gitignore").write_text("secrets/\n")
    kept = specpair(repo, "init")
    assert "kept      site/mkdocs.yml (differs from the template; --force" in kept.stdout
    assert (repo / "site/mkdocs.yml").read_text() == "site_name: ours\n"
    # .gitignore keeps the team's entries and gains only what is missing
    ignored = (repo / ".gitignore").read_text().splitlines()
    assert ignored[0] == "secrets/" and "site/docs/pairs/" in ignored
    assert specpair(repo, "init", "--force").returncode == 0
    assert (repo / "site/mkdocs.yml").read_bytes() == first["site/mkdocs.yml"]


def test_init_adds_no_example_to_a_repository_with_pairs(repo: Path) -> None:
    assert specpair(repo, "init").returncode == 0
    (repo / "runbooks/deepseek-v3-mtp").rename(repo / "runbooks/ours")
    result = specpair(repo, "init")
    assert "runbooks/ already holds pairs: no example pair added" in result.stdout
    assert not (repo / "runbooks/deepseek-v3-mtp").exists()


def test_a_repository_pinned_to_another_release_is_refused_by_name(repo: Path) -> None:
    assert specpair(repo, "init").returncode == 0
    config = repo / "specpair.toml"
    config.write_text(config.read_text().replace(f'"{__version__}"', '"0.0.1"'))
    result = specpair(repo, "build", "--check")
    assert result.returncode == 1
    assert f"this repository pins specpair 0.0.1; this is specpair {__version__}" in \
        result.stderr
    # the install that works: from the repository specpair.toml names, at the tag
    assert f"pip install 'specpair[site] @ git+{PLACEHOLDER_SOURCE}@v0.0.1'" in result.stderr
    config.write_text(f'[specpair]\nversion = "{__version__}"\nrunbooks = "pairs"\n')
    moved = specpair(repo, "check")
    assert moved.returncode == 1 and "keeps runbooks in runbooks/" in moved.stderr


def test_the_site_template_uses_the_theme_as_this_project_does() -> None:
    from specpair.commands.init import template

    ours = yaml.safe_load((REPO / "site/mkdocs.yml").read_text())
    scaffold = yaml.safe_load(template("mkdocs.yml"))
    for key in ("theme", "plugins", "markdown_extensions", "docs_dir", "strict", "extra",
                "extra_css"):
        assert scaffold[key] == ours[key], key
    # the files those settings name ship in the package with the same bytes
    for rel, name in (("stylesheets/specpair.css", "specpair.css"),
                      ("assets/javascripts/iframe-worker/shim.js", "iframe-worker-shim.js")):
        assert template(name) == (REPO / "site/docs" / rel).read_bytes(), rel


def test_this_repository_still_names_its_nox_sessions(tmp_path: Path) -> None:
    from specpair.load.project import commands

    assert commands(REPO).build == "nox -s build"
    (tmp_path / "noxfile.py").write_text("")
    (tmp_path / "specpair.toml").write_text(f'[specpair]\nversion = "{__version__}"\n')
    assert commands(tmp_path).build == "specpair build"


def test_the_packages_exact_pins_are_the_development_pins() -> None:
    """What a plain install resolves for the output-shaping libraries (pinned exactly in
    pyproject) must be what the committed outputs were generated with (constraints.txt)."""
    import re
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["site"]
    exact = dict(r.split("==") for r in requirements if "==" in r)
    assert {"grafana-foundation-sdk", "pydantic", "PyYAML", "jsonnet",
            "mkdocs-material"} <= set(exact)

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()
    constraints = dict(line.split("==") for line in
                       (REPO / "constraints.txt").read_text().split() if "==" in line)
    pinned = {norm(k): v for k, v in constraints.items()}
    for name, version in exact.items():
        assert pinned[norm(name)] == version, name


def installed_as(tmp: Path, direct_url: dict[str, object] | None) -> Path:
    """A folder holding specpair's metadata as pip writes it for an install, with the
    PEP 610 record of where it came from; on PYTHONPATH ahead of site-packages,
    importlib.metadata finds this specpair first."""
    site = tmp / "site"
    info = site / f"specpair-{__version__}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: specpair\n"
                                   f"Version: {__version__}\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return site


GIT = {"vcs": "git", "requested_revision": f"v{__version__}", "commit_id": "0" * 40}


def test_init_pins_the_repository_specpair_was_installed_from(repo: Path) -> None:
    """Installed as the README says, from a git URL at the tag: CI installs from there."""
    site = installed_as(repo.parent, {"url": "https://git.acme.test/platform/specpair",
                                      "vcs_info": GIT})
    result = specpair(repo, "init", site=site)
    assert result.returncode == 0, result.stderr
    table = tomllib.loads((repo / "specpair.toml").read_text())["specpair"]
    assert table == {"version": __version__, "source": "https://git.acme.test/platform/specpair",
                     "runbooks": "runbooks", "schema": "schema", "site": "site"}
    assert "note" not in result.stdout


@pytest.mark.parametrize("direct_url", [
    None,  # installed from a wheel file or an index: pip records nothing
    {"url": "file:///work/specpair", "dir_info": {"editable": True}},  # `pip install -e .`
    {"url": "file:///home/me/specpair", "vcs_info": GIT},  # a clone CI cannot reach
    {"url": "https://me:token@git.acme.test/specpair", "vcs_info": GIT},  # never a secret
    {"url": "https://git.acme.test/specpair.tar.gz", "archive_info": {}},  # not a repository
])
def test_init_writes_the_placeholder_and_says_so_when_the_source_is_unknown(
        repo: Path, direct_url: dict[str, object] | None) -> None:
    site = installed_as(repo.parent, direct_url)
    result = specpair(repo, "init", site=site)
    assert result.returncode == 0, result.stderr
    table = tomllib.loads((repo / "specpair.toml").read_text())["specpair"]
    assert table["source"] == PLACEHOLDER_SOURCE and table["version"] == __version__
    assert "note      specpair.toml: set source to the git repository you install " \
        f"specpair from (CI installs its tag v{__version__})" in result.stdout
    # idempotent: the file is as init would write it, and the note is not repeated
    again = specpair(repo, "init", site=site)
    assert "unchanged specpair.toml" in again.stdout and "note" not in again.stdout


@pytest.mark.parametrize("source", ["git@github.com:acme/specpair.git",
                                    "http://git.acme.test/specpair",
                                    "https://me:token@git.acme.test/specpair",
                                    "https://git.acme.test/specpair?ref=main", 7])
def test_a_source_ci_could_not_install_from_is_refused_by_name(repo: Path,
                                                               source: object) -> None:
    value = json.dumps(source)  # a TOML basic string or integer
    (repo / "specpair.toml").write_text(f'[specpair]\nversion = "{__version__}"\n'
                                        f"source = {value}\n")
    result = specpair(repo, "check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"source = {source!r}: not the https URL of a git repository" in result.stderr


def test_the_readmes_install_line_is_the_release_init_pins() -> None:
    """One version: the package's. pyproject takes it, init pins it, and the README
    installs its tag, from the repository init writes when it cannot tell (the
    placeholder the README says to replace)."""
    source, tag = install_url()
    assert tag == f"v{__version__}" and source == PLACEHOLDER_SOURCE
    assert SOURCE_PATTERN.fullmatch(source)
    assert install_line() == f'python -m pip install "{requirement(source, __version__)}"'
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == \
        ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == \
        {"attr": "specpair.__version__"}
