"""Hardening findings of issue 29 that are neither the file policy (test_file_policy.py)
nor escaping of records (test_record_escaping.py): each test reproduces one finding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specpair.cli import main
from tests.conftest import REPO
from tests.planted_records import FIXTURE


def cli(root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        *args: str) -> tuple[int, str]:
    monkeypatch.chdir(root)
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out + out.err


@pytest.fixture
def inline_repo(tmp_path: Path) -> Path:
    """The bench fixture: a runbook with an inline GPU (no catalog key) and records."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root / "runbooks" / "tiny-vllm")
    shutil.copytree(REPO / "runbooks" / "deepseek-v3-mtp", root / "runbooks" / "deepseek-v3-mtp")
    return root


@pytest.mark.parametrize("command", [
    ["site"], ["build"], ["validate"], ["check"],
    ["plan", "runbooks/tiny-vllm/runbook.yaml"],
    ["plan", "runbooks/tiny-vllm/runbook.yaml", "--gpus", "H100-80GB,common"],
    ["budget", "runbooks/tiny-vllm/runbook.yaml"],
    ["budget", "runbooks/tiny-vllm/runbook.yaml", "--tp", "2"],
    ["calibrate", "runbooks/tiny-vllm/runbook.yaml"],
])
def test_an_inline_gpu_goes_through_every_command(
        inline_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    # `site` and `plan` raised KeyError: unknown GPU (the inline GPU's name)
    status, output = cli(inline_repo, capsys, monkeypatch, *command)
    assert status in (0, 1), output
    assert "unknown GPU" not in output, output
    if command[0] in ("site", "build", "plan", "budget", "calibrate"):
        assert status == 0, output


@pytest.mark.parametrize("command", ["budget", "plan", "calibrate"])
def test_a_folder_of_several_runbooks_is_a_usage_error(
        inline_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    status, output = cli(inline_repo, capsys, monkeypatch, command, "runbooks")
    assert status == 1 and "2 runbooks here; this command works on one" in output, output
