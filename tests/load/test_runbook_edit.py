"""Editing runbooks in place (`specpair plan --write`): only the chosen fields change.

Each test edits a scratch copy of the real example runbooks (runbooks/lib included, so
Jsonnet imports resolve), then checks the text line by line against the original and
reads the result back with specpair's own loader. Expected values are the ones each test
asks for; which YAML strings need quotes is decided by PyYAML's resolver, not by us.
"""

from __future__ import annotations

import difflib
import json
import os
import stat
from pathlib import Path

import _jsonnet
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specpair.load.edit_jsonnet import jsonnet_scalar
from specpair.load.edit_yaml import yaml_scalar
from specpair.load.runbook_edit import Change, EditResult, plan_edit
from specpair.load.runbooks import load_runbook
from specpair.model.common import KVDtype
from specpair.model.errors import SpecpairError
from specpair.write.runbook_edit import write_edit


def _changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    """Lines removed from and added to `old` (difflib opcodes over whole lines)."""
    a, b = old.splitlines(), new.splitlines()
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed.extend(a[i1:i2])
            added.extend(b[j1:j2])
    return removed, added


def _comment_lines(text: str, marker: str) -> list[str]:
    return [line for line in text.splitlines() if marker in line]


def _apply(path: Path, changes: list[Change]) -> tuple[str, EditResult]:
    before = path.read_bytes().decode("utf-8")  # bytes: read_text would translate \r\n
    result = plan_edit(path, path.name, changes)
    assert result.applied, result.reasons
    assert result.reasons == []
    assert path.read_bytes().decode("utf-8") == before  # planning never writes
    write_edit(result)
    after = path.read_bytes().decode("utf-8")
    assert after == result.new_text
    assert result.diff.startswith(f"--- a/{path.name}\n+++ b/{path.name}\n")
    return before, result


# --------------------------------------------------------------------------- YAML


def test_yaml_scalars_and_a_flow_value_change_in_place(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    before, _ = _apply(path, [
        Change(("speculation", "num_speculative_tokens"), 2),
        Change(("deployment", "gpu"), "H100-80GB"),
        Change(("deployment", "parallel", "tensor"), 4),
    ])
    after = path.read_text(encoding="utf-8")
    removed, added = _changed_lines(before, after)
    assert removed == ["  num_speculative_tokens: 3", "  gpu: H200-141GB",
                       "  parallel: {tensor: 8}"]
    assert added == ["  num_speculative_tokens: 2", "  gpu: H100-80GB", "  parallel: {tensor: 4}"]
    for line in _comment_lines(before, "#"):
        assert line in after.splitlines()
    runbook = load_runbook(path).runbook
    assert runbook.speculation.num_speculative_tokens == 2
    assert runbook.deployment.gpu == "H100-80GB"
    assert runbook.deployment.parallel.tensor == 4


def test_enum_members_are_written_as_their_values(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/llama33-70b-eagle3-vllm/runbook.yaml"
    before, _ = _apply(path, [Change(("deployment", "kv_cache_dtype"), KVDtype.FP8_E4M3)])
    assert _changed_lines(before, path.read_text(encoding="utf-8")) == (
        [], ["  kv_cache_dtype: fp8_e4m3"])
    assert load_runbook(path).runbook.deployment.kv_cache_dtype is KVDtype.FP8_E4M3


def test_yaml_value_with_a_trailing_comment_keeps_the_comment(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/ling-3-flash-dspark/runbook.yaml"
    before, _ = _apply(path, [Change(("deployment", "linear_state", "replay_cache_len"), 64)])
    removed, added = _changed_lines(before, path.read_text(encoding="utf-8"))
    assert [r.replace("32", "64", 1) for r in removed] == added
    assert added == ["    replay_cache_len: 64       # power of two >= 2 x 9; the default 16 "
                     "fails at start-up"]
    assert load_runbook(path).runbook.deployment.linear_state.replay_cache_len == 64


def test_yaml_missing_keys_are_inserted_into_their_mappings(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    before, _ = _apply(path, [
        Change(("deployment", "kv_cache_dtype"), "fp8_e4m3"),       # block mapping
        Change(("deployment", "parallel", "expert"), 8),             # flow mapping
        Change(("deployment", "assumptions", "cuda_graph_bytes"), 1 << 30),  # missing parent
        Change(("geometry", "draft", "num_hidden_layers"), 1),       # top level, after a >- text
    ])
    after = path.read_text(encoding="utf-8")
    removed, added = _changed_lines(before, after)
    assert removed == ["  parallel: {tensor: 8}"]
    assert added == ["  parallel: {tensor: 8, expert: 8}",
                     "  kv_cache_dtype: fp8_e4m3",
                     "  assumptions: {cuda_graph_bytes: 1073741824}",
                     "geometry: {draft: {num_hidden_layers: 1}}"]
    # the new deployment keys follow its last entry; the new section follows the file's end
    lines = after.splitlines()
    assert lines[lines.index("  max_running_requests: 64") + 1] == "  kv_cache_dtype: fp8_e4m3"
    assert lines[-1] == "geometry: {draft: {num_hidden_layers: 1}}"
    for line in _comment_lines(before, "#"):
        assert line in lines
    runbook = load_runbook(path).runbook
    assert runbook.deployment.kv_cache_dtype.value == "fp8_e4m3"
    assert runbook.deployment.parallel.expert == 8
    assert runbook.deployment.parallel.tensor == 8
    assert runbook.deployment.assumptions.cuda_graph_bytes == 1 << 30
    assert runbook.geometry.draft.num_hidden_layers == 1
    assert runbook.waivers[-1].reason.endswith("replaces this provisional SLO.")


def test_yaml_insert_under_a_missing_parent_and_where_a_key_is_absent(
        repo_copy: Path) -> None:
    path = repo_copy / "runbooks/llama33-70b-eagle3-vllm/runbook.yaml"
    text = path.read_text(encoding="utf-8")
    # a runbook that leaves both to their defaults (both are optional in the schema)
    text = text.replace("  parallel: {tensor: 4}\n", "").replace("  memory_fraction: 0.92\n", "")
    path.write_text(text, encoding="utf-8")
    before, _ = _apply(path, [
        Change(("deployment", "parallel", "tensor"), 2),
        Change(("deployment", "parallel", "draft_tensor"), 1),
        Change(("deployment", "memory_fraction"), 0.9),
        Change(("deployment", "gpu"), "H200-141GB"),
    ])
    removed, added = _changed_lines(before, path.read_text(encoding="utf-8"))
    assert removed == ["  gpu: H100-80GB"]
    assert added == ["  gpu: H200-141GB",  # a plain string stays plain
                     "  parallel: {tensor: 2, draft_tensor: 1}", "  memory_fraction: 0.9"]
    deployment = load_runbook(path).runbook.deployment
    assert (deployment.parallel.tensor, deployment.parallel.draft_tensor) == (2, 1)
    assert deployment.memory_fraction == 0.9
    assert deployment.gpu == "H200-141GB"


def test_yaml_nested_block_mapping_ends_after_its_commented_lines(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/ling-3-flash-dspark/runbook.yaml"
    before, _ = _apply(path, [Change(("deployment", "page_size"), 64),
                              Change(("deployment", "linear_state", "ssm_dtype"), "bfloat16")])
    lines = path.read_text(encoding="utf-8").splitlines()
    at = lines.index("    ssm_dtype: bfloat16")
    assert lines[at - 1].startswith("    replay_cache_len: 32       # power of two")
    assert lines[at + 1] == "  page_size: 64"
    assert lines[at + 2] == "acceptance:"
    assert _changed_lines(before, "\n".join(lines))[0] == []
    runbook = load_runbook(path).runbook
    assert runbook.deployment.page_size == 64
    assert runbook.deployment.linear_state.ssm_dtype == "bfloat16"
    assert runbook.deployment.linear_state.replay_cache_len == 32


@pytest.mark.parametrize("value", ["on", "yes", "no", "1.5", "1e3", "0x10", "null", "~", "true",
                                   "", "a: b", "#x", "[1]", "H200-141GB", "it's", "x\ny"])
def test_yaml_strings_quote_only_when_the_resolver_needs_it(value: str) -> None:
    rendered = yaml_scalar(value)
    # PyYAML's own resolver is the judge, in block and in flow context
    assert yaml.safe_load(f"k: {rendered}\n") == {"k": value}
    assert yaml.safe_load(f"k: {{a: {rendered}}}\n") == {"k": {"a": value}}
    if value == "H200-141GB":
        assert rendered == value


def test_quoted_strings_round_trip_through_an_edit(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/ling-3-flash-dspark/runbook.yaml"
    before, _ = _apply(path, [Change(("pair", "owner"), "1.5"),
                              Change(("staging", "warmup", "prompt"), "on"),
                              Change(("acceptance", "reference", "workload"), "yes")])
    removed, added = _changed_lines(before, path.read_text(encoding="utf-8"))
    assert removed == ["  owner: serving-platform",
                       '  warmup: {prompt: "Say hello.", max_tokens: 16, timeout_s: 300}']
    assert added == ["  owner: '1.5'", "    workload: 'yes'",
                     '  warmup: {prompt: "on", max_tokens: 16, timeout_s: 300}']
    runbook = load_runbook(path).runbook
    assert runbook.pair.owner == "1.5"
    assert runbook.staging.warmup.prompt == "on"
    assert runbook.acceptance.reference is not None
    assert runbook.acceptance.reference.workload == "yes"


def test_yaml_edit_keeps_windows_line_ends(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/llama33-70b-eagle3-vllm/runbook.yaml"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    _apply(path, [Change(("deployment", "kv_cache_dtype"), "fp8_e4m3")])
    raw = path.read_bytes()
    assert b"  kv_cache_dtype: fp8_e4m3\r\n" in raw
    assert raw.count(b"\n") == raw.count(b"\r\n")
    assert load_runbook(path).runbook.deployment.kv_cache_dtype.value == "fp8_e4m3"


def test_yaml_value_the_schema_refuses_is_not_applied(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    before = path.read_bytes()
    result = plan_edit(path, "deepseek.yaml", [Change(("deployment", "parallel", "tensor"), 0)])
    assert not result.applied and result.new_text is None
    assert any(r.startswith("deployment.parallel.tensor:") for r in result.reasons)
    assert "+  parallel: {tensor: 0}" in result.diff
    with pytest.raises(SpecpairError, match="not applied"):
        write_edit(result)
    assert path.read_bytes() == before


# --------------------------------------------------------------------------- Jsonnet


def test_jsonnet_field_defined_in_the_runbook_changes_in_place(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/llama31-8b-eagle3/runbook.jsonnet"
    lib = repo_copy / "runbooks/lib/sglang-dense.libsonnet"
    lib_before = lib.read_bytes()
    before, _ = _apply(path, [Change(("speculation", "num_steps"), 3)])
    removed, added = _changed_lines(before, path.read_text(encoding="utf-8"))
    assert removed == ["  speculation: { method: 'EAGLE3', num_steps: 5, topk: 4, "
                       "num_draft_tokens: 8 },"]
    assert added == ["  speculation: { method: 'EAGLE3', num_steps: 3, topk: 4, "
                     "num_draft_tokens: 8 },"]
    for line in _comment_lines(before, "//"):
        assert line in path.read_text(encoding="utf-8").splitlines()
    assert load_runbook(path).runbook.speculation.num_steps == 3
    assert lib.read_bytes() == lib_before


def test_jsonnet_field_from_the_library_is_overridden_in_this_runbook_only(
        repo_copy: Path) -> None:
    path = repo_copy / "runbooks/qwen3-8b-dflash/runbook.jsonnet"
    other = repo_copy / "runbooks/llama31-8b-eagle3/runbook.jsonnet"
    lib = repo_copy / "runbooks/lib/sglang-dense.libsonnet"
    lib_before = lib.read_bytes()
    other_before = load_runbook(other).runbook.deployment
    before, _ = _apply(path, [Change(("deployment", "gpu"), "H200-141GB"),
                              Change(("deployment", "memory_fraction"), 0.88),
                              Change(("deployment", "parallel", "tensor"), 2)])
    removed, added = _changed_lines(before, path.read_text(encoding="utf-8"))
    assert removed == ["  deployment+: { context_length: 32768 },"]
    assert added == ["  deployment+: { context_length: 32768, gpu: 'H200-141GB', "
                     "memory_fraction: 0.88, parallel+: { tensor: 2 } },"]
    deployment = load_runbook(path).runbook.deployment
    assert deployment.gpu == "H200-141GB"
    assert deployment.memory_fraction == 0.88
    assert deployment.parallel.tensor == 2
    assert lib.read_bytes() == lib_before
    assert load_runbook(other).runbook.deployment == other_before


def test_jsonnet_new_section_goes_into_the_outermost_object(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/llama31-8b-eagle3/runbook.jsonnet"
    before, _ = _apply(path, [Change(("geometry", "draft", "num_hidden_layers"), 1),
                              Change(("pair", "description"), "it's a test")])
    removed, added = _changed_lines(before, path.read_text(encoding="utf-8"))
    assert removed == []
    assert added == ['    description: "it\'s a test",',
                     "  geometry+: { draft+: { num_hidden_layers: 1 } },"]
    runbook = load_runbook(path).runbook
    assert runbook.geometry.draft.num_hidden_layers == 1
    assert runbook.pair.description == "it's a test"


def test_jsonnet_fields_go_into_the_object_literal_a_value_ends_in(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/qwen3-8b-dflash/runbook.jsonnet"
    path.write_text(path.read_text(encoding="utf-8").replace(
        "  deployment+: { context_length: 32768 },\n",
        "  deployment: base.deployment {\n    context_length: 32768  // long prompts\n  },\n"),
        encoding="utf-8")
    before, _ = _apply(path, [Change(("deployment", "gpu"), "H200-141GB")])
    removed, added = _changed_lines(before, path.read_text(encoding="utf-8"))
    assert removed == ["    context_length: 32768  // long prompts"]
    assert added == ["    context_length: 32768,  // long prompts", "    gpu: 'H200-141GB',"]
    deployment = load_runbook(path).runbook.deployment
    assert deployment.gpu == "H200-141GB"
    assert deployment.context_length == 32768
    assert deployment.port == 30000  # still merged onto the library's deployment


def test_jsonnet_edit_that_changes_other_fields_is_refused(repo_copy: Path) -> None:
    # a library that derives one field from another: overriding gpus_per_node in the
    # runbook would move max_running_requests too, which the plan did not choose
    lib = repo_copy / "runbooks/lib/sglang-dense.libsonnet"
    lib.write_text(lib.read_text(encoding="utf-8").replace(
        "max_running_requests: 16,", "max_running_requests: 2 * self.gpus_per_node,"),
        encoding="utf-8")
    path = repo_copy / "runbooks/qwen3-8b-dflash/runbook.jsonnet"
    before, lib_before = path.read_bytes(), lib.read_bytes()
    result = plan_edit(path, "runbook.jsonnet", [Change(("deployment", "gpus_per_node"), 4)])
    assert not result.applied and result.new_text is None
    assert any("deployment.max_running_requests" in r and "deployment.gpus_per_node" in r
               for r in result.reasons)
    assert "+  deployment+: { context_length: 32768, gpus_per_node: 4 }," in result.diff
    with pytest.raises(SpecpairError):
        write_edit(result)
    assert path.read_bytes() == before and lib.read_bytes() == lib_before


def test_jsonnet_value_computed_by_an_expression_is_left_to_a_person(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/qwen3-8b-dflash/runbook.jsonnet"
    text = path.read_text(encoding="utf-8")
    text = text.replace("local base", "local ctx = 32768;\nlocal base").replace(
        "context_length: 32768", "context_length: ctx")
    path.write_text(text, encoding="utf-8")
    result = plan_edit(path, "runbook.jsonnet", [Change(("deployment", "context_length"), 16384),
                                                 Change(("speculation", "block_size"), 8)])
    assert not result.applied
    assert any(r.startswith("deployment.context_length:") and "(ctx)" in r
               for r in result.reasons)
    assert "+  deployment+: { context_length: 16384 }," in result.diff
    assert path.read_text(encoding="utf-8") == text


# --------------------------------------------------------------------------- bad input, writing


@pytest.mark.parametrize(("path", "words"), [
    (("deployment", "gpux"), ["deployment.gpux", "`gpu`"]),
    (("deploy", "gpu"), ["deploy.gpu", "`deployment`"]),
    (("deployment", "port", "number"), ["deployment.port.number", "single value"]),
])
def test_unknown_field_is_a_clear_error(repo_copy: Path, path: tuple[str, ...],
                                        words: list[str]) -> None:
    runbook = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    with pytest.raises(SpecpairError) as info:
        plan_edit(runbook, "runbooks/deepseek-v3-mtp/runbook.yaml", [Change(path, 1)])
    rendered = str(info.value)
    assert rendered.startswith("runbooks/deepseek-v3-mtp/runbook.yaml")
    for word in words:
        assert word in rendered


def test_keys_inside_lists_are_refused_with_a_reason(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    result = plan_edit(path, "r.yaml", [Change(("workloads", "prompts"), 10)])
    assert not result.applied
    assert result.reasons and "workloads" in result.reasons[0] and "list" in result.reasons[0]


def test_write_refuses_a_file_changed_since_the_plan(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    result = plan_edit(path, "r.yaml", [Change(("deployment", "port"), 30001)])
    assert result.applied
    path.write_text(path.read_text(encoding="utf-8") + "# edited meanwhile\n",
                    encoding="utf-8")
    with pytest.raises(SpecpairError, match="changed after"):
        write_edit(result)
    assert path.read_text(encoding="utf-8").endswith("# edited meanwhile\n")


def test_write_is_atomic_and_keeps_the_file_mode(repo_copy: Path) -> None:
    path = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    os.chmod(path, 0o640)
    folder_before = sorted(p.name for p in path.parent.iterdir())
    inode_before = path.stat().st_ino
    _apply(path, [Change(("deployment", "port"), 30001)])
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_ino != inode_before  # replaced, not rewritten in place
    assert sorted(p.name for p in path.parent.iterdir()) == folder_before
    assert load_runbook(path).runbook.deployment.port == 30001


def test_write_refuses_a_runbook_swapped_for_a_link_after_the_plan(repo_copy: Path,
                                                                   tmp_path: Path) -> None:
    """A runbook replaced by a symbolic link between planning and writing (same bytes, so
    the digest matches) is refused by the file policy, and the file the link points to,
    outside the repository, is not written through the link."""
    path = repo_copy / "runbooks/deepseek-v3-mtp/runbook.yaml"
    result = plan_edit(path, "r.yaml", [Change(("deployment", "port"), 30001)])
    assert result.applied
    outside = tmp_path / "outside.yaml"
    outside.write_bytes(path.read_bytes())
    before = outside.read_bytes()
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(SpecpairError, match="symbolic link"):
        write_edit(result)
    assert outside.read_bytes() == before
    assert path.is_symlink()


@given(st.one_of(st.text(st.characters(blacklist_categories=("Cs",))), st.booleans(),
                 st.integers(), st.floats(allow_nan=False, allow_infinity=False)))
@settings(max_examples=300, deadline=None)
def test_any_scalar_reads_back_as_itself(value: str | bool | int | float) -> None:
    rendered = yaml_scalar(value)
    block, flow = yaml.safe_load(f"k: {rendered}\n"), yaml.safe_load(f"k: {{a: {rendered}}}\n")
    for got in (block["k"], flow["k"]["a"]):
        assert type(got) is type(value) and got == value
    if isinstance(value, str):
        for style in ("'", '"'):  # replacing a quoted string keeps its quotes
            assert yaml.safe_load(f"k: {yaml_scalar(value, style)}\n") == {"k": value}


@given(st.one_of(st.text(st.characters(blacklist_categories=("Cs",))), st.booleans(),
                 st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False)))
@settings(max_examples=100, deadline=None)
def test_any_scalar_is_a_jsonnet_literal_of_itself(value: str | bool | int | float) -> None:
    for quote in ("'", '"'):
        literal = jsonnet_scalar(value, quote)
        got = json.loads(_jsonnet.evaluate_snippet("literal", f"{{ k: {literal} }}"))["k"]
        assert got == value and isinstance(got, bool) == isinstance(value, bool)
