"""The build pipeline: determinism, staleness, and outputs that survive a failed build."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from specpair.commands.build import build
from specpair.model.errors import SpecpairError
from tests.support.paths import REPO


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_committed_outputs_are_current() -> None:
    result = build(REPO, check_only=True)
    assert result.drift.stale == [], "run `nox -s build` and commit the outputs"


def test_two_builds_are_byte_identical(repo_copy: Path) -> None:
    for generated in repo_copy.glob("runbooks/*/generated"):
        for f in generated.iterdir():
            f.unlink()
    first = build(repo_copy)
    assert first.drift.missing, "the first build must write the removed files"
    before = tree_digest(repo_copy)
    second = build(repo_copy)
    assert second.drift.stale == []
    assert tree_digest(repo_copy) == before


def test_editing_a_spec_makes_check_list_the_stale_files(repo_copy: Path) -> None:
    runbook = repo_copy / "runbooks" / "ling-3-flash-dspark" / "runbook.yaml"
    runbook.write_text(runbook.read_text().replace("context_length: 32768",
                                                   "context_length: 65536"))
    result = build(repo_copy, check_only=True)
    assert Path("runbooks/ling-3-flash-dspark/generated/pair.json") in result.drift.changed
    assert all("ling-3-flash-dspark" in str(p) for p in result.drift.stale)


def test_shared_jsonnet_library_change_reaches_every_importer(repo_copy: Path) -> None:
    lib = repo_copy / "runbooks" / "lib" / "sglang-dense.libsonnet"
    text = lib.read_text()
    assert "max_running_requests: 16," in text
    lib.write_text(text.replace("max_running_requests: 16,", "max_running_requests: 12,"))
    stale = {p.parts[1] for p in build(repo_copy, check_only=True).drift.stale}
    assert stale == {"qwen3-8b-dflash", "llama31-8b-eagle3"}


def test_failed_build_leaves_previous_outputs_intact(repo_copy: Path) -> None:
    before = tree_digest(repo_copy / "runbooks")
    good = repo_copy / "runbooks" / "ling-3-flash-dspark" / "runbook.yaml"
    good.write_text(good.read_text().replace("context_length: 32768", "context_length: 65536"))
    bad = repo_copy / "runbooks" / "deepseek-v3-mtp" / "runbook.yaml"
    bad.write_text(bad.read_text().replace("gpu: H200-141GB", "gpu: nope"))
    with pytest.raises(SpecpairError) as info:
        build(repo_copy)
    assert "unknown GPU 'nope'" in info.value.render()
    after = tree_digest(repo_copy / "runbooks")
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {"ling-3-flash-dspark/runbook.yaml", "deepseek-v3-mtp/runbook.yaml"}


def test_files_no_longer_generated_are_removed(repo_copy: Path) -> None:
    leftover = repo_copy / "runbooks" / "qwen3-8b-dflash" / "generated" / "old-output.md"
    leftover.write_text("from an older specpair\n")
    assert Path("runbooks/qwen3-8b-dflash/generated/old-output.md") in build(
        repo_copy, check_only=True).drift.orphaned
    build(repo_copy)
    assert not leftover.exists()


def test_stale_lock_stops_the_build(repo_copy: Path) -> None:
    lock = repo_copy / "runbooks" / "qwen3-8b-dflash" / "lock.json"
    data = json.loads(lock.read_text())
    data["draft"]["source"]["repo"] = "someone/else"
    lock.write_text(json.dumps(data))
    with pytest.raises(SpecpairError, match="the lock is stale"):
        build(repo_copy)


def test_pair_json_carries_resolved_geometry_and_provenance(repo_copy: Path) -> None:
    pair = json.loads((repo_copy / "runbooks" / "ling-3-flash-dspark" / "generated" /
                       "pair.json").read_text())
    assert pair["target"]["geometry"]["full_attention_layers"] == 7
    assert pair["target"]["geometry"]["linear_attention"]["layers"] == 35
    assert pair["draft"]["geometry"]["target_layer_ids"] == [1, 11, 23, 29, 35]
    assert pair["target"]["provenance"] == "declared"
    assert "geometry.head_dim" in pair["draft"]["unconfirmed"]
