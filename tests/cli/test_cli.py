"""The command line never misleads: exit status, usage errors, where it may run from."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import proc
from tests.support.paths import REPO, write
from tests.support.runbooks import MINIMAL


def _closed_pipe_run(args: list[str], cwd: Path, stream: str) -> int:
    """Run specpair with stdout or stderr on a pipe whose reader has already gone
    (`specpair … | head -0`): every write gets EPIPE, deterministically."""
    read, write_end = os.pipe()
    os.close(read)
    try:
        target = {"stdout": write_end} if stream == "stdout" else {
            "stderr": write_end, "stdout": subprocess.DEVNULL}
        process = proc.run([sys.executable, "-m", "specpair", *args], cwd=cwd,
                                 check=False, cpu_s=120, **target)  # type: ignore[call-overload]
    finally:
        os.close(write_end)
    return int(process.returncode)


def _invalid_repo(tmp_path: Path) -> Path:
    write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
          MINIMAL.replace("method: DFLASH", "method: DFLASHH"))
    return tmp_path


def test_a_failing_validate_keeps_its_status_on_a_closed_pipe(tmp_path: Path) -> None:
    root = _invalid_repo(tmp_path)
    assert _closed_pipe_run(["validate", "runbooks"], root, "stderr") == 1


def test_a_failing_check_keeps_its_status_on_a_closed_pipe(repo_copy: Path) -> None:
    rb = repo_copy / "runbooks" / "qwen3-8b-dflash" / "runbook.jsonnet"
    rb.write_text(rb.read_text().replace("{ rule: 'SP101'", "{ rule: 'SP103'"))
    assert _closed_pipe_run(["check", "runbooks"], repo_copy, "stdout") == 1


def test_a_passing_check_exits_0_on_a_closed_pipe() -> None:
    assert _closed_pipe_run(["check", "runbooks"], REPO, "stdout") == 0


def test_stale_build_check_keeps_exit_3_on_a_closed_pipe(repo_copy: Path) -> None:
    (repo_copy / "runbooks" / "qwen3-8b-dflash" / "generated" / "budget.md").write_text("x")
    assert _closed_pipe_run(["build", "--check"], repo_copy, "stderr") == 3


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return proc.run([sys.executable, "-m", "specpair", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, cpu_s=300)


def test_an_unknown_fail_on_class_is_a_usage_error() -> None:
    result = run("impact", "--base", "HEAD", "--fail-on", "addded")
    assert result.returncode == 2
    assert "unknown class(es) 'addded'" in result.stderr and "added" in result.stderr


def test_a_bad_concurrency_list_is_a_usage_error() -> None:
    result = run("bench", "runbooks/qwen3-8b-dflash/runbook.jsonnet", "--baseline", "x",
                 "--spec", "y", "--concurrency", "1,four")
    assert result.returncode == 2
    assert "not a comma-separated list of whole numbers" in result.stderr
    assert "Traceback" not in result.stderr


def test_commands_work_from_inside_a_pair_folder(repo_copy: Path) -> None:
    inside = repo_copy / "runbooks" / "qwen3-8b-dflash"
    for command in (["build", "--check"], ["check"], ["validate"]):
        result = run(*command, cwd=inside)
        assert result.returncode == 0, (command, result.stderr)
    checked = run("check", cwd=inside / "generated")
    examples = len(list(REPO.glob("runbooks/*/runbook.*")))
    assert f"{examples} pair(s) checked" in checked.stdout
    # paths in reports stay relative to the root, as from the root
    assert "runbooks/qwen3-8b-dflash/runbook.jsonnet" in checked.stdout


def test_outside_any_repository_the_error_names_the_folder() -> None:
    # not pytest's tmp_path: nox points TMPDIR inside the checkout (.nox/<session>/tmp),
    # and from there the repository's own runbooks/ is rightly found
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        outside = Path(folder).resolve()
        assert not any((p / "runbooks").is_dir() for p in (outside, *outside.parents))
        result = run("check", cwd=outside)
    assert result.returncode == 1
    assert f"{outside}/runbooks: no such file or folder" in result.stderr


def test_a_what_if_budget_is_labelled_with_its_overrides() -> None:
    result = run("budget", "runbooks/llama31-8b-eagle3/runbook.jsonnet", "--tp", "2",
                 "--memory-fraction", "0.5")
    assert result.returncode == 0, result.stderr
    head = result.stdout.split("## Baseline")[0]
    assert head.startswith("# What-if memory budget:")
    assert "`--tp 2`, `--memory-fraction 0.5`" in head
    assert "tensor parallel 2" in head and "do not edit" not in head
    committed = (REPO / "runbooks/llama31-8b-eagle3/generated/budget.md").read_text()
    assert committed.startswith("# Memory budget:") and "do not edit" in committed


def test_negative_headroom_beside_a_fitting_verdict_is_explained() -> None:
    explained = 0
    for budget in sorted(REPO.glob("runbooks/*/generated/budget.md")):
        text = budget.read_text()
        (headroom,) = [line for line in text.splitlines()
                       if line.startswith("| headroom, all running requests at full context |")]
        (verdict,) = [line for line in text.splitlines() if line.startswith("| verdict |")]
        if " -" in headroom and "| fits" in verdict:
            assert "negative headroom means they cannot all do so" in text, budget
            explained += 1
    assert explained, "no example shows a negative headroom beside a fitting verdict"


def test_budget_what_if_values_are_checked_by_the_parser() -> None:
    rb = "runbooks/llama31-8b-eagle3/runbook.jsonnet"
    typo = "unknown GPU 'H100-80G'; did you mean H100-80GB"
    for option, value, says in (("--gpu", "H100-80G", typo),
                                ("--tp", "0", "0 is not positive"),
                                ("--memory-fraction", "1.5", "not between 0 and 1"),
                                ("--context-length", "8k", "'8k' is not a whole number")):
        result = run("budget", rb, option, value)
        assert result.returncode == 2, (option, result.stderr)
        assert says in result.stderr and "Traceback" not in result.stderr


def test_a_plan_refused_after_parsing_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A PlanError (options the parser cannot judge alone) reads as argparse's own errors
    and exits 2, through the one error formatter."""
    from specpair.analyse.plan import search
    from specpair.analyse.plan.options import PlanError
    from specpair.cli import main

    def refuse(*_: object) -> None:
        raise PlanError("no TP size fits 1 GPU(s) with pipeline size 2")

    monkeypatch.setattr(search, "plan", refuse)
    runbook = REPO / "runbooks/llama31-8b-eagle3/runbook.jsonnet"
    assert main(["plan", str(runbook), "--root", str(REPO)]) == 2
    captured = capsys.readouterr()
    assert captured.err == ("specpair plan: error: no TP size fits 1 GPU(s) with pipeline "
                            "size 2\n") and captured.out == ""
