"""A plain install of the built wheel: outputs independent of how specpair was installed,
and a team repository that has nothing but what `specpair init` wrote."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.install.support import Run
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


def test_an_unpinned_install_writes_the_committed_outputs(run: Run, tmp_path: Path) -> None:
    """The examples' committed outputs were written by the pinned development install;
    the wheel installed without constraints must find them current."""
    for folder in ("runbooks", "schema"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    ok(run("specpair", "build", "--check", cwd=tmp_path))


def test_a_team_repository_from_init_alone(run: Run, tmp_path: Path) -> None:
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
    ok(run("actionlint", "-color=false", ".github/workflows/specpair.yml", cwd=repo))
    # nothing of this repository's own files was needed: the tree holds only what init,
    # the team and specpair's commands wrote
    tracked = set(git(repo, "ls-files").split())
    assert "noxfile.py" not in tracked and "constraints.txt" not in tracked
