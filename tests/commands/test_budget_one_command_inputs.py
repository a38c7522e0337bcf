"""The budget without a runbook: from a hub repository (the local hub server, by range
reads as `specpair lock` reads it), into a runbook a build gives the same budget, and
its refusals of bad input, each located on the option that caused it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from specpair.cli import main
from tests.support import proc
from tests.support.checkpoints import llama_config, write_checkpoint
from tests.support.hub_lock import lock, publish
from tests.support.hubserver import HubServer
from tests.support.paths import REPO

SGLANG = ["--engine", "sglang==0.5.23", "--gpu", "H100-80GB", "--tp", "1"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    write_checkpoint(tmp_path / "target", llama_config())
    write_checkpoint(tmp_path / "draft", llama_config(hidden=128, layers=2), seed=1)
    return tmp_path / "target", tmp_path / "draft"


def standalone(target: Path | str, draft: Path | str) -> list[str]:
    return ["budget", "--target", str(target), "--draft", str(draft), *SGLANG,
            "--method", "STANDALONE", "--num-speculative-tokens", "3"]


def test_a_local_pair_is_budgeted_offline_from_its_safetensors_headers(
        folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    status, out, err = run(capsys, *standalone(*folders))
    assert status == 0, err
    assert "# Memory budget:" in out and "without a runbook" in out
    assert "break-even τ*" in out and "give `--slo TAU`" in out
    status, out, err = run(capsys, *standalone(*folders), "--json", "--slo", "2.5")
    data = json.loads(out)
    assert data["speculative"]["cell_draft"] > 0 and data["break_even"]["slo"] == 2.5


def test_the_written_runbook_builds_to_the_same_budget(
        folders: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    pair = root / "runbooks" / "tiny-pair"
    argv = [*standalone(*folders), "--context-length", "2048", "--json"]
    status, out, err = run(capsys, *argv, "--write-runbook", str(pair))
    assert status == 0, err
    one = json.loads(out)
    one.pop("break_even")
    assert sorted(p.name for p in pair.iterdir()) == ["lock.json", "runbook.yaml"]
    status, _, err = run(capsys, "build", "--root", str(root))
    assert status == 0, err
    assert json.loads((pair / "generated" / "budget.json").read_text()) == one
    # written again, the same pair is left as it is; a changed one is never overwritten
    status, _, err = run(capsys, *argv, "--write-runbook", str(pair))
    assert status == 0 and "already holds this pair" in err
    before = (pair / "runbook.yaml").read_bytes()
    status, _, err = run(capsys, *argv, "--tp", "2", "--write-runbook", str(pair))
    assert status == 1 and "exists with other content" in err
    assert (pair / "runbook.yaml").read_bytes() == before


def test_a_hub_pair_reads_headers_by_range_as_lock_does(tmp_path: Path) -> None:
    """The same pair locked with `specpair lock` and budgeted in one command: one budget."""
    write_checkpoint(tmp_path / "ckpt" / "target", llama_config(), shards=2)
    write_checkpoint(tmp_path / "ckpt" / "draft", llama_config(hidden=128, layers=2), seed=1)
    root = tmp_path / "repo"
    (root / "runbooks" / "p").mkdir(parents=True)
    (root / "runbooks" / "p" / "runbook.yaml").write_text(
        "pair: {name: p, title: p, owner: unowned}\n"
        "engine: {name: sglang, version: 0.5.23}\n"
        "target: {repo: org/target, revision: main}\n"
        "draft: {repo: org/draft, revision: main}\n"
        "speculation: {method: STANDALONE, num_speculative_tokens: 3}\n"
        "deployment: {gpu: H100-80GB, parallel: {tensor: 1}, context_length: 4096}\n"
        "acceptance: {slo: {min_length: 1.0, basis: provisional}}\n")
    with HubServer() as hub:
        publish(hub, "org/target", tmp_path / "ckpt" / "target")
        publish(hub, "org/draft", tmp_path / "ckpt" / "draft")
        assert lock(root, hub).returncode == 0
        sent = hub.total_bytes()
        env = {**os.environ, "HF_HOME": str(tmp_path / ".hf"), "HF_ENDPOINT": hub.url,
               "SPECPAIR_HUB_TIMEOUT_S": "2", "PYTHONPATH": str(REPO / "src")}
        env.pop("HF_HUB_OFFLINE", None)
        done = proc.run([sys.executable, "-m", "specpair", *standalone("org/target",
                         "org/draft"), "--json"], cwd=tmp_path, env=env, capture_output=True,
                        text=True, check=False, cpu_s=120)
        assert done.returncode == 0, done.stderr
        # the lock's reads (config, tokenizer files, headers by range), and no more
        assert 0 < hub.total_bytes() - sent <= sent + 1024
    one = json.loads(done.stdout)
    one.pop("break_even")
    runbook = proc.run([sys.executable, "-m", "specpair", "budget", "runbooks/p/runbook.yaml",
                        "--json"], cwd=root, env=env, capture_output=True, text=True,
                       check=False, cpu_s=120)
    assert runbook.returncode == 0, runbook.stderr
    assert one == json.loads(runbook.stdout)


@pytest.mark.parametrize(("change", "flag", "said"), [
    ({"--engine": "sglang==9.9.9"}, "--engine", "sglang 9.9.9 is not supported"),
    ({"--engine": "sglang-0.5.23"}, "--engine", "is not NAME==VERSION"),
    ({"--method": "EAGEL3"}, "--method", "got 'EAGEL3'"),
    ({"--method": "NGRAM"}, "--draft", "takes no draft model"),
    ({"--tp": "16"}, "--tp", "16 ranks"),
])
def test_bad_options_are_refused_on_the_option(
        folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        change: dict[str, str], flag: str, said: str) -> None:
    argv = standalone(*folders)
    for option, value in change.items():
        argv[argv.index(option) + 1] = value
    status, out, err = run(capsys, *argv)
    assert status == 1 and out == ""
    assert err.startswith(f"{flag}: ") and said in err, err


def test_an_unknown_gpu_is_a_usage_error_with_its_neighbours(
        folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    argv = standalone(*folders)
    argv[argv.index("--gpu") + 1] = "H100-80G"
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and "did you mean H100-80GB" in capsys.readouterr().err


def test_a_folder_without_config_or_weights_is_refused_with_the_flag_to_give(
        folders: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target, draft = folders
    empty = tmp_path / "empty"
    empty.mkdir()
    status, _, err = run(capsys, *standalone(empty, draft))
    assert status == 1 and err.startswith("--target: ") and "no config.json" in err
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((target / "config.json").read_text())
    status, _, err = run(capsys, *standalone(bare, draft))
    assert status == 1 and "weight bytes are unknown" in err and "--target-bytes N" in err
    status, _, err = run(capsys, *standalone(bare, draft), "--target-bytes", "2_000_000")
    assert status == 0, err
    status, _, err = run(capsys, *standalone(tmp_path / "missing", draft))
    assert status == 1 and "no such checkpoint folder" in err


def test_the_two_forms_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    runbook = str(REPO / "runbooks" / "deepseek-v3-mtp" / "runbook.yaml")
    status, _, err = run(capsys, "budget", runbook, "--target", "org/x", "--root", str(REPO))
    assert status == 2 and "two forms" in err and "--target" in err
    status, _, err = run(capsys, "budget")
    assert status == 2 and "give a runbook file, or --target" in err
    status, _, err = run(capsys, "budget", "--target", "org/x", "--gpu", "H100-80GB")
    assert status == 2 and "--engine, --method, --tp are required" in err
