"""Locks without hub access: a local folder with a shard index, a declared lock from
config.json and declared sizes, and locks whose claimed provenance is impossible."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import proc
from tests.support.checkpoints import TOKENIZER
from tests.support.paths import FIXTURES, write

QWEN3_8B = FIXTURES / "configs" / "Qwen__Qwen3-8B" / "config.json"
DFLASH = FIXTURES / "configs" / "sgl-project__SpecForge-qwen3-8b-dflash" / "config.json"

# the byte counts are the test's own inputs: what the index says is what the lock holds
TARGET_BYTES = 16_381_470_720
DRAFT_BYTES = 2_096_000_000

RUNBOOK = """\
pair: {{name: local-pair, title: Qwen3-8B with DFlash from local folders, owner: tests}}
engine: {{name: sglang, version: 0.5.23}}
target: {{{target}, dtype: bfloat16}}
draft: {{{draft}}}
speculation: {{method: DFLASH, block_size: 16}}
deployment: {{gpu: H100-80GB, context_length: 32768, max_running_requests: 16}}
acceptance: {{slo: {{min_length: 3.0}}}}
"""


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    return proc.run([sys.executable, "-m", "specpair", *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False, cpu_s=300)


def folder(path: Path, config: Path, total: int | None, tokenizer: bool = True) -> Path:
    """A checkpoint folder as an air-gapped planner has it: no weights."""
    path.mkdir(parents=True)
    shutil.copy(config, path / "config.json")
    if tokenizer:
        (path / "tokenizer.json").write_text(json.dumps(TOKENIZER))
    if total is not None:
        (path / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total},
             "weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}}))
    return path


def test_a_pair_locks_offline_from_folders_with_a_shard_index(tmp_path: Path) -> None:
    target = folder(tmp_path / "ckpt" / "target", QWEN3_8B, TARGET_BYTES)
    draft = folder(tmp_path / "ckpt" / "draft", DFLASH, DRAFT_BYTES, tokenizer=False)
    root = tmp_path / "repo"
    write(root / "runbooks" / "local-pair" / "runbook.yaml",
          RUNBOOK.format(target=f"path: {target}", draft=f"path: {draft}"))
    result = cli(root, "lock")
    assert result.returncode == 0, result.stderr
    lock = json.loads((root / "runbooks" / "local-pair" / "lock.json").read_text())
    t, d = lock["target"], lock["draft"]
    assert (t["provenance"], t["weights"]["weight_bytes"]) == ("local", TARGET_BYTES)
    assert d["weights"]["weight_bytes"] == DRAFT_BYTES
    assert t["geometry"]["num_hidden_layers"] == 36 and d["geometry"]["block_size"] == 16
    # bytes / 2 for bfloat16 is derived, not read: listed as unconfirmed
    assert t["unconfirmed"] == ["weights.params_by_dtype"]
    assert d["unconfirmed"] == ["weights.params_by_dtype", "tokenizer"]
    assert t["tokenizer"]["files"] == ["tokenizer.json"]
    checked = cli(root, "check")
    assert "SP105" not in checked.stdout and "SP104 [warning]" in checked.stdout
    assert cli(root, "build").returncode == 0


def test_a_folder_with_only_config_json_says_how_to_go_on(tmp_path: Path) -> None:
    target = folder(tmp_path / "target", QWEN3_8B, None)
    root = tmp_path / "repo"
    write(root / "runbooks" / "local-pair" / "runbook.yaml",
          RUNBOOK.format(target=f"path: {target}", draft=f"path: {target}"))
    result = cli(root, "lock")
    assert result.returncode == 1
    assert "no .safetensors files and no model.safetensors.index.json" in result.stderr
    assert "specpair lock --declare" in result.stderr


def test_a_declared_lock_from_config_json_lists_every_fact_as_unconfirmed(
        tmp_path: Path) -> None:
    root = tmp_path / "repo"
    sha = "0123456789abcdef0123456789abcdef01234567"
    write(root / "runbooks" / "local-pair" / "runbook.yaml", RUNBOOK.format(
        target=f"repo: Qwen/Qwen3-8B, revision: {sha}",
        draft=f"repo: z-lab/Qwen3-8B-DFlash-b16, revision: {sha}"))
    result = cli(root, "lock", "--declare", "runbooks/local-pair/runbook.yaml",
                 "--target-config", str(QWEN3_8B), "--target-bytes", str(TARGET_BYTES),
                 "--draft-config", str(DFLASH), "--draft-bytes", str(DRAFT_BYTES))
    assert result.returncode == 0, result.stderr
    lock = json.loads((root / "runbooks" / "local-pair" / "lock.json").read_text())
    every = ["download_bytes", "geometry", "tokenizer", "weights.params_by_dtype",
             "weights.weight_bytes"]
    for role, size in (("target", TARGET_BYTES), ("draft", DRAFT_BYTES)):
        section = lock[role]
        assert section["provenance"] == "declared" and section["unconfirmed"] == every
        assert section["weights"]["weight_bytes"] == size
        assert "commit" not in section["source"]
    assert lock["target"]["geometry"]["max_position_embeddings"] == 40960
    checked = cli(root, "check")
    assert checked.returncode == 0, checked.stdout
    assert "target lock facts are declared and unconfirmed: download_bytes, geometry" in \
        checked.stdout
    assert cli(root, "build").returncode == 0


def test_declare_without_sizes_is_an_error(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / "runbooks" / "local-pair" / "runbook.yaml", RUNBOOK.format(
        target="repo: Qwen/Qwen3-8B, revision: main",
        draft="repo: z-lab/Qwen3-8B-DFlash-b16, revision: main"))
    result = cli(root, "lock", "--declare", "--target-config", str(QWEN3_8B))
    assert result.returncode == 1 and "--target-bytes N" in result.stderr
    assert cli(root, "lock", "--declare", "--target-bytes", "lots").returncode == 2


def _declared_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "runbooks" / "local-pair" / "runbook.yaml", RUNBOOK.format(
        target="repo: Qwen/Qwen3-8B, revision: main",
        draft="repo: z-lab/Qwen3-8B-DFlash-b16, revision: main"))
    assert cli(root, "lock", "--declare", "--target-config", str(QWEN3_8B), "--target-bytes",
               str(TARGET_BYTES), "--draft-config", str(DFLASH), "--draft-bytes",
               str(DRAFT_BYTES)).returncode == 0
    return root


def _edit_lock(root: Path, role: str, **update: object) -> None:
    path = root / "runbooks" / "local-pair" / "lock.json"
    lock = json.loads(path.read_text())
    for key, value in update.items():
        if key == "commit":
            lock[role]["source"]["commit"] = value
        else:
            lock[role][key] = value
    path.write_text(json.dumps(lock, indent=2))


def test_a_hand_written_lock_with_an_invented_commit_is_flagged(tmp_path: Path) -> None:
    root = _declared_repo(tmp_path)
    _edit_lock(root, "target", unconfirmed=[], commit="f" * 40)
    result = cli(root, "check")
    assert result.returncode == 1
    assert "SP105 [error] target lock section is declared yet names commit ffffffffffff for " \
           "revision 'main'" in result.stdout
    assert "target lock section is declared but lists no unconfirmed facts" in result.stdout


def test_a_lock_claiming_hub_provenance_must_be_consistent(tmp_path: Path) -> None:
    root = _declared_repo(tmp_path)
    _edit_lock(root, "draft", provenance="hub@" + "a" * 40, commit="b" * 40)
    result = cli(root, "check")
    assert result.returncode == 1
    out = result.stdout
    assert f"draft lock section claims hub@{'a' * 40} but its source commit is {'b' * 40}" \
        in out
    # a resolution may leave only the parameter count and the tokenizer unread
    assert "draft lock section claims hub provenance but lists unconfirmed facts a " \
           "resolution reads: download_bytes, geometry" in out
    assert f"claims hub@{'a' * 40} but its weights are declared" in out


DEEPSEEK_V3 = FIXTURES / "configs" / "deepseek-ai__DeepSeek-V3" / "config.json"
# DeepSeek-V3's README: 685B parameters = 671B main model + 14B in the MTP module (FP8)
DEEPSEEK_BYTES, DEEPSEEK_MTP = 685_000_000_000, 14_000_000_000


def test_a_bundled_mtp_draft_is_declared_without_a_size(repo_copy: Path) -> None:
    """The DeepSeek-V3 MTP example: its draft is layer 61 of the target checkpoint, so the
    declared lock needs only the target's config and bytes."""
    runbook = "runbooks/deepseek-v3-mtp/runbook.yaml"
    result = cli(repo_copy, "lock", "--declare", runbook, "--target-config", str(DEEPSEEK_V3),
                 "--target-bytes", str(DEEPSEEK_BYTES))
    assert result.returncode == 0, result.stderr
    lock = json.loads((repo_copy / "runbooks" / "deepseek-v3-mtp" / "lock.json").read_text())
    draft = lock["draft"]
    assert draft["source"] == lock["target"]["source"] and draft["download_bytes"] == 0
    assert draft["weights"]["inside_target"] is True
    assert "inside_target" not in lock["target"]["weights"]
    assert draft["geometry"]["num_hidden_layers"] == 1  # num_nextn_predict_layers
    # no share declared: derived, said so, unconfirmed, and near the README's 14B module
    assert "weights.weight_bytes" in draft["unconfirmed"]
    assert "DERIVED" in draft["sources"]["weights"]
    assert abs(draft["weights"]["weight_bytes"] - DEEPSEEK_MTP) < DEEPSEEK_MTP / 4
    checked = cli(repo_copy, "check", runbook)
    assert checked.returncode == 0, checked.stdout
    assert "draft lock facts are declared and unconfirmed: geometry" in checked.stdout
    assert cli(repo_copy, "build").returncode == 0
    budget = json.loads(cli(repo_copy, "budget", runbook, "--json").stdout)
    per_rank = {line["key"]: line["value"] for line in budget["weights"]}
    # the checkpoint loads once, split between the two runners over tp = 8
    assert per_rank["target_weights"] + per_rank["draft_weights"] == DEEPSEEK_BYTES // 8

    # the README's share, declared: taken as given
    result = cli(repo_copy, "lock", "--declare", runbook, "--target-config", str(DEEPSEEK_V3),
                 "--target-bytes", str(DEEPSEEK_BYTES), "--draft-bytes", str(DEEPSEEK_MTP))
    assert result.returncode == 0, result.stderr
    lock = json.loads((repo_copy / "runbooks" / "deepseek-v3-mtp" / "lock.json").read_text())
    assert lock["draft"]["weights"]["weight_bytes"] == DEEPSEEK_MTP
    assert lock["draft"]["sources"]["weights"].endswith("given as --draft-bytes")


def test_a_bundled_draft_refuses_a_config_or_a_share_larger_than_the_target(
        repo_copy: Path) -> None:
    runbook = "runbooks/deepseek-v3-mtp/runbook.yaml"
    before = (repo_copy / "runbooks" / "deepseek-v3-mtp" / "lock.json").read_bytes()
    base = ("lock", "--declare", runbook, "--target-config", str(DEEPSEEK_V3),
            "--target-bytes", str(DEEPSEEK_BYTES))
    too_big = cli(repo_copy, *base, "--draft-bytes", str(DEEPSEEK_BYTES))
    assert too_big.returncode == 1
    assert "is not a share of --target-bytes" in too_big.stderr
    with_config = cli(repo_copy, *base, "--draft-config", str(DEEPSEEK_V3))
    assert with_config.returncode == 1
    assert "has no config.json of its own" in with_config.stderr
    zero = cli(repo_copy, *base, "--draft-bytes", "0")
    assert zero.returncode == 2 and "needs no --draft-bytes" in zero.stderr
    # nothing was written by the refused commands
    assert (repo_copy / "runbooks" / "deepseek-v3-mtp" / "lock.json").read_bytes() == before


def test_a_separate_draft_still_needs_its_config_and_size(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / "runbooks" / "local-pair" / "runbook.yaml", RUNBOOK.format(
        target="repo: Qwen/Qwen3-8B, revision: main",
        draft="repo: z-lab/Qwen3-8B-DFlash-b16, revision: main"))
    result = cli(root, "lock", "--declare", "runbooks/local-pair/runbook.yaml",
                 "--target-config", str(QWEN3_8B), "--target-bytes", str(TARGET_BYTES),
                 "--draft-config", str(DFLASH))
    assert result.returncode == 1 and "--draft-bytes N" in result.stderr
