"""specpair installed by the README's own commands, from a git clone at the release tag:
what they installed and set up, outputs independent of how specpair was installed, and a
team repository that has nothing but what `specpair init` wrote."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

from tests.install.support import Adopted, Run, Served
from tests.support.paths import FIXTURES, REPO, write

QWEN3_8B = FIXTURES / "configs" / "Qwen__Qwen3-8B" / "config.json"
DFLASH = FIXTURES / "configs" / "sgl-project__SpecForge-qwen3-8b-dflash" / "config.json"
SHA = "0123456789abcdef0123456789abcdef01234567"
# a team's own pair, as its author writes it (the sizes are this test's inputs)
PAIR = f"""\
# yaml-language-server: $schema=../../schema/runbook.schema.json
pair: {{name: qwen3-8b-dflash, title: Qwen3-8B with DFlash, owner: inference-team}}
engine: {{name: sglang, version: 0.5.23}}
target: {{repo: Qwen/Qwen3-8B, revision: {SHA}, dtype: bfloat16}}
draft: {{repo: z-lab/Qwen3-8B-DFlash-b16, revision: {SHA}}}
speculation: {{method: DFLASH, block_size: 16}}
deployment: {{gpu: H100-80GB, context_length: 32768, max_running_requests: 16}}
acceptance: {{slo: {{min_length: 3.0}}}}
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=root, capture_output=True, text=True, check=True).stdout


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stdout + result.stderr
    return result.stdout


def test_the_readmes_commands_install_the_tagged_release_and_init_pins_its_source(
        adopted: Adopted, served: Served, fresh: Path) -> None:
    """The README's lines, run as written, installed specpair from the repository URL
    (here the served clone) at the tag, and `specpair init` pinned that release and
    that URL for CI."""
    probe = subprocess.run(
        [str(fresh / "bin" / "python"), "-I", "-c",
         "import importlib.metadata as m, specpair; d = m.distribution('specpair'); "
         "print(specpair.__version__, d.version, specpair.__file__); "
         "print(d.read_text('direct_url.json'))"],
        capture_output=True, text=True, check=True).stdout.splitlines()
    version, metadata_version, where = probe[0].split()
    assert f"v{version}" == served.tag and metadata_version == version
    assert Path(where).is_relative_to(fresh)  # the installed package, not the source tree
    direct = json.loads(probe[1])
    tagged = git(served.clone, "rev-parse", f"{served.tag}^{{commit}}").strip()
    assert direct["url"] == served.url
    assert direct["vcs_info"] == {"vcs": "git", "requested_revision": served.tag,
                                  "commit_id": tagged}
    repo = adopted.folder / "team-runbooks"
    table = tomllib.loads((repo / "specpair.toml").read_text())["specpair"]
    assert (table["version"], table["source"]) == (version, served.url)
    assert git(repo, "log", "--format=%s") == "specpair init\n"
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert "1 pair(s) checked: 0 failing finding(s)" in adopted.output


def test_an_unpinned_install_writes_the_committed_outputs(run: Run, tmp_path: Path) -> None:
    """The examples' committed outputs were written by the pinned development install;
    the wheel installed without constraints must find them current."""
    for folder in ("runbooks", "schema"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    ok(run("specpair", "build", "--check", cwd=tmp_path))


def test_a_team_repository_from_init_alone(run: Run, actionlint: Path,
                                          tmp_path: Path) -> None:
    repo = tmp_path / "team-runbooks"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    ok(run("specpair", "init", cwd=repo))
    ok(run("specpair", "build", cwd=repo))
    ok(run("specpair", "check", cwd=repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "specpair init")

    # the team's first own pair, locked from the config.json files its author has
    write(repo / "runbooks" / "qwen3-8b-dflash" / "runbook.yaml", PAIR)
    ok(run("specpair", "lock", "--declare", "runbooks/qwen3-8b-dflash/runbook.yaml",
           "--target-config", str(QWEN3_8B), "--target-bytes", "16381470720",
           "--draft-config", str(DFLASH), "--draft-bytes", "2096000000", cwd=repo))
    stale = run("specpair", "build", "--check", cwd=repo)
    assert stale.returncode == 3 and "run `specpair build`" in stale.stderr
    ok(run("specpair", "build", cwd=repo))
    ok(run("specpair", "build", "--check", cwd=repo))
    checked = ok(run("specpair", "check", cwd=repo))
    assert "2 pair(s) checked: 0 failing" in checked
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first pair")
    impact = ok(run("specpair", "impact", "--base", "HEAD~1", "--head", "HEAD", cwd=repo))
    assert "`qwen3-8b-dflash` (added)" in impact
    site = run("specpair", "site", "--changes-base", "HEAD~1", cwd=repo)
    assert "skipped" not in ok(site) + site.stderr
    ok(run("mkdocs", "build", "--strict", "-q", "-f", "site/mkdocs.yml", cwd=repo))
    built = repo / "site" / "site"
    assert (built / "pairs" / "qwen3-8b-dflash.html").is_file()
    assert "New pair: review the whole two-model plan" in \
        (built / "pairs" / "qwen3-8b-dflash.html").read_text()
    # the workflow init wrote, checked by actionlint (and shellcheck, where installed)
    ok(run(str(actionlint), "-color=false", ".github/workflows/specpair.yml", cwd=repo))
    # nothing of this repository's own files was needed: the tree holds only what init,
    # the team and specpair's commands wrote
    tracked = set(git(repo, "ls-files").split())
    assert "noxfile.py" not in tracked and "constraints.txt" not in tracked
