"""The gate is at least as strict as the engines: unwaivable rules, waivers that must
mean something, co-design gaps, and errors located at the field they are about."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specpair.analyse.checks.gate import Context, failing, run
from specpair.load.runbooks import load_runbook
from specpair.model.config_geometry import from_hf_config
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry
from specpair.resolve.pair import ResolvedPair
from tests.support import proc
from tests.support.geometries import dense
from tests.support.pairs import SHA, make_pair, with_runbook
from tests.support.paths import FIXTURES, REPO, write
from tests.support.runbooks import MINIMAL


def qwen3_32b() -> Geometry:
    """64 layers, hidden 5120, 64 heads, 8 KV heads, 40,960 positions (published config)."""
    return from_hf_config(json.loads(
        (FIXTURES / "configs/Qwen__Qwen3-32B/config.json").read_text()))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return proc.run([sys.executable, "-m", "specpair", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, cpu_s=300)


def _edit(root: Path, pair: str, old: str, new: str) -> Path:
    (path,) = (root / "runbooks" / pair).glob("runbook.*")
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


# --------------------------------------------------------------------------- waivers


def _with_waiver(tmp_path: Path, rule: str, reason: str = "a reason long enough") -> Path:
    return write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
                 MINIMAL + f"waivers:\n  - {{rule: {rule}, reason: {reason}}}\n")


@pytest.mark.parametrize("rule", ["SP601", "SP402", "SP501", "SP502", "SP901"])
def test_a_waiver_for_an_unwaivable_rule_is_an_error(tmp_path: Path, rule: str) -> None:
    path = _with_waiver(tmp_path, rule)
    with pytest.raises(SpecpairError) as exc:
        load_runbook(path)
    (problem,) = exc.value.problems
    assert f"{rule} (" in problem.message and "cannot be waived" in problem.message
    assert (problem.location.line, problem.location.field) == (9, "waivers[0].rule")


def test_an_unknown_rule_in_a_waiver_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SpecpairError) as exc:
        load_runbook(_with_waiver(tmp_path, "SP999"))
    (problem,) = exc.value.problems
    assert problem.message == "unknown rule SP999" and "SP101" in problem.hint


def test_a_waivable_rule_can_still_be_waived(tmp_path: Path) -> None:
    assert load_runbook(_with_waiver(tmp_path, "SP401")).runbook.waivers[0].rule == "SP401"


def test_a_waiver_that_waives_nothing_is_reported(repo_copy: Path) -> None:
    # the Qwen3-8B DFlash draft covers the context: a waiver for SP401 waives nothing
    _edit(repo_copy, "qwen3-8b-dflash", "{ rule: 'SP702'",
          "{ rule: 'SP401', reason: 'the draft was trained at 2k positions only' },\n"
          "    { rule: 'SP702'")
    result = cli("check", "--strict", cwd=repo_copy)
    assert result.returncode == 1
    assert re.search(r"runbook\.jsonnet:\d+:\d+: SP001 \[warning\] the waiver for SP401 "
                     r"waives nothing", result.stdout), result.stdout


def test_an_unwaivable_finding_is_never_waived_in_memory() -> None:
    # a pair built without validate (tests, library use) still fails on SP601
    pair = make_pair(dense(36), dense(2), speculation={"method": "STANDALONE",
                                                       "num_speculative_tokens": 3},
                     target_bytes=90 << 30)
    data = pair.runbook.model_dump(mode="json")
    data["waivers"] = [{"rule": "SP601", "reason": "the gate is wrong about this"}]
    waived = pair.model_copy(update={"runbook": pair.runbook.model_validate(data)})
    assert "SP601" in {f.rule for f in failing(run(Context(waived)))}


def test_an_unquoted_comma_in_a_waiver_reason_gets_a_hint(tmp_path: Path) -> None:
    path = _with_waiver(tmp_path, "SP401", "trained at 2k, measured at 8k")
    with pytest.raises(SpecpairError) as exc:
        load_runbook(path)
    (problem,) = exc.value.problems
    assert problem.message == "unknown key 'measured at 8k'"
    assert "unquoted comma" in problem.hint and 'reason: "' in problem.hint


# --------------------------------------------------------------------------- context


def test_context_beyond_the_targets_positions_fails_the_gate_and_validate(
        repo_copy: Path) -> None:
    # Qwen3-8B: max_position_embeddings 40960 (tests/fixtures/configs/Qwen__Qwen3-8B)
    _edit(repo_copy, "qwen3-8b-dflash", "context_length: 32768", "context_length: 131072")
    checked = cli("check", cwd=repo_copy)
    assert checked.returncode == 1
    assert re.search(r"runbook\.jsonnet:14:\d+: SP402 \[error\] context length 131,072 "
                     r"exceeds the target's max_position_embeddings \(40,960\)",
                     checked.stdout), checked.stdout
    validated = cli("validate", cwd=repo_copy)
    assert validated.returncode == 1 and "SP402" in validated.stderr


def test_context_at_the_targets_positions_passes(repo_copy: Path) -> None:
    _edit(repo_copy, "qwen3-8b-dflash", "context_length: 32768", "context_length: 40960")
    assert "SP402" not in cli("check", cwd=repo_copy).stdout


def test_a_jsonnet_string_slip_in_the_context_is_caught(repo_copy: Path) -> None:
    # '32768' + 1 is the string "327681" in Jsonnet; it must not reach a launch script
    _edit(repo_copy, "qwen3-8b-dflash", "context_length: 32768", "context_length: '32768' + 1")
    result = cli("check", cwd=repo_copy)
    assert result.returncode == 1 and "SP402" in result.stdout


# --------------------------------------------------------------------------- co-design


def test_draft_vocab_larger_than_the_vocabulary_fails() -> None:
    target = qwen3_32b()
    eagle = dense(1, hidden=5120).model_copy(update={"vocab_size": target.vocab_size})
    ok = make_pair(target, eagle.model_copy(update={"draft_vocab_size": 32000}),
                   speculation={"method": "EAGLE3", "num_speculative_tokens": 3})
    bad = make_pair(target, eagle.model_copy(update={"draft_vocab_size": 200000}),
                    speculation={"method": "EAGLE3", "num_speculative_tokens": 3})
    assert "SP201" not in {f.rule for f in run(Context(ok))}
    (finding,) = [f for f in run(Context(bad)) if f.rule == "SP201"]
    assert "draft_vocab_size 200000 is larger than the target vocabulary (151936)" in \
        finding.message


def test_eagle3_hidden_size_must_be_the_targets() -> None:
    target = qwen3_32b()  # hidden 5120
    spec = {"method": "EAGLE3", "num_speculative_tokens": 3}
    bad = make_pair(target, dense(1, hidden=4096), speculation=spec)
    ok = make_pair(target, dense(1, hidden=5120, heads=40), speculation=spec)
    assert "SP307" in {f.rule for f in failing(run(Context(bad)))}
    assert "SP307" not in {f.rule for f in run(Context(ok))}


def test_declared_feature_layers_beyond_the_target_fail_at_the_field() -> None:
    target = qwen3_32b()  # 64 layers
    spec = {"method": "EAGLE3", "num_speculative_tokens": 3}
    pair = make_pair(target, dense(1, hidden=5120, heads=40), speculation=spec)
    bad = with_runbook(pair, codesign={"feature_layers": [1, 31, 70]})
    ok = with_runbook(pair, codesign={"feature_layers": [1, 31, 60]})
    found = [f for f in run(Context(bad)) if f.rule == "SP301"]
    assert [(f.field, f.message.split(":")[0]) for f in found] == [
        ("codesign.feature_layers.2", "declared feature layer 70 does not exist in the "
                                      "target (64 layers, ids 0-63)")]
    assert "SP301" not in {f.rule for f in run(Context(ok))}


def test_sp301_points_at_the_draft_not_the_top_of_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "runbooks" / "demo"
    write(folder / "runbook.yaml", MINIMAL.replace("name: demo", "name: demo"))
    lock = json.loads((REPO / "runbooks/qwen3-8b-dflash/lock.json").read_text())
    lock["pair"] = "demo"
    for role, repo in (("target", "Qwen/Qwen3-8B"), ("draft", "z-lab/Qwen3-8B-DFlash-b16")):
        lock[role]["source"] = {"repo": repo, "revision": SHA}
    lock["draft"]["geometry"]["target_layer_ids"] = [1, 9, 17, 25, 40]
    write(folder / "lock.json", json.dumps(lock))
    result = cli("check", cwd=tmp_path)
    assert "runbooks/demo/runbook.yaml:4:8: SP301 [error] draft feature layers [40]" in \
        result.stdout, result.stdout


@pytest.mark.parametrize(("draft_tokens", "ok"), [(64, False), (7, True)])
def test_a_tree_cannot_verify_more_tokens_than_it_drafts(tmp_path: Path, draft_tokens: int,
                                                         ok: bool) -> None:
    text = MINIMAL.replace("{method: DFLASH, block_size: 16}",
                           f"{{method: EAGLE3, num_steps: 2, topk: 2, "
                           f"num_draft_tokens: {draft_tokens}}}")
    path = write(tmp_path / "runbooks" / "demo" / "runbook.yaml", text)
    if ok:
        load_runbook(path)
        return
    with pytest.raises(SpecpairError) as exc:
        load_runbook(path)
    (problem,) = exc.value.problems
    assert problem.location.field == "speculation.num_draft_tokens"
    assert "2 steps × top-2 draft at most 6 candidate tokens" in problem.message
    assert "at most 7" in problem.hint


def test_sglangs_own_spelling_gets_a_hint(tmp_path: Path) -> None:
    text = MINIMAL.replace("{method: DFLASH, block_size: 16}",
                           "{method: EAGLE3, num_steps: 3, topk: 1, num_draft_tokens: 4}")
    with pytest.raises(SpecpairError) as exc:
        load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml", text))
    (problem,) = exc.value.problems
    assert problem.location.field == "speculation.num_steps"
    assert "write num_speculative_tokens: 3 and remove num_steps, num_draft_tokens" in \
        problem.hint


# --------------------------------------------------------------------------- TP, locks


def _line_of(repo: Path, pair: str, text: str) -> int:
    """The 1-based line of `text` in the pair's runbook (positions move as runbooks grow)."""
    lines = (repo / "runbooks" / pair / "runbook.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_validate_refuses_a_tp_the_heads_do_not_divide(repo_copy: Path) -> None:
    _edit(repo_copy, "llama33-70b-eagle3-vllm", "parallel: {tensor: 4}",
          "parallel: {tensor: 3}")
    result = cli("validate", cwd=repo_copy)
    assert result.returncode == 1
    examples = len(list(REPO.glob("runbooks/*/runbook.*")))
    assert "0 of 1" not in result.stderr
    assert f"{examples - 1} of {examples} runbook(s) valid" in result.stderr
    line = _line_of(repo_copy, "llama33-70b-eagle3-vllm", "parallel: {tensor: 3}")
    assert re.search(rf"runbook\.yaml:{line}:\d+: deployment\.parallel\.tensor: SP501: target: "
                     r"64 attention heads do not split over 3 ranks", result.stderr)


def test_build_keeps_sp501s_position_and_names_the_real_head_count(repo_copy: Path) -> None:
    _edit(repo_copy, "llama33-70b-eagle3-vllm", "parallel: {tensor: 4}",
          "parallel: {tensor: 3}")
    result = cli("build", "--check", cwd=repo_copy)
    assert result.returncode == 1
    line = _line_of(repo_copy, "llama33-70b-eagle3-vllm", "parallel: {tensor: 3}")
    assert re.search(rf"runbook\.yaml:{line}:\d+: deployment\.parallel\.tensor: target: 64 "
                     r"attention heads", result.stderr), result.stderr
    assert "the target's 64 attention heads, 8 KV heads accept: 1, 2, 4, 8, 16, 32, 64" in \
        result.stderr
    assert "32 heads" not in result.stderr


def test_a_broken_lock_is_reported_in_lock_json(repo_copy: Path) -> None:
    lock = repo_copy / "runbooks" / "qwen3-8b-dflash" / "lock.json"
    lock.write_text(lock.read_text().replace('"draft": {', '"draft": {{', 1))
    for command in (["check"], ["build", "--check"]):
        result = cli(*command, cwd=repo_copy)
        out = result.stdout + result.stderr
        assert result.returncode == 1
        assert re.search(r"runbooks/qwen3-8b-dflash/lock\.json:2:\d+:.* lock\.json is not "
                         r"valid JSON", out), out
        about = [line for line in out.splitlines() if "qwen3-8b-dflash" in line]
        assert not any("YAML" in line or "runbook.jsonnet" in line for line in about), about


def test_lock_geometry_errors_point_at_the_lock_schema(repo_copy: Path) -> None:
    lock = repo_copy / "runbooks" / "qwen3-8b-dflash" / "lock.json"
    data = json.loads(lock.read_text())
    data["target"]["geometry"]["num_key_value_heads"] = 7
    lock.write_text(json.dumps(data, indent=2))
    result = cli("build", "--check", cwd=repo_copy)
    assert result.returncode == 1
    assert "runbooks/qwen3-8b-dflash/lock.json:" in result.stderr
    assert "num_attention_heads (32) is not a multiple of num_key_value_heads (7)" in \
        result.stderr
    assert "schema/lock.schema.json" in result.stderr
    assert "runbook.schema.json" not in result.stderr


# --------------------------------------------------------------------------- engine flags


def _vllm_pair(**deployment: object) -> ResolvedPair:
    return make_pair(dense(32), dense(1), engine="vllm", version="0.33.0",
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 3},
                     deployment=deployment)


@pytest.mark.parametrize(("kv", "fails"), [("fp16", True), ("bf16", False), ("auto", False)])
def test_vllm_refuses_a_float_kv_dtype_other_than_the_models(kv: str, fails: bool) -> None:
    # vLLM 0.33.0 VllmConfig._reject_mismatched_float_kv_cache; the model is bfloat16
    pair = _vllm_pair(kv_cache_dtype=kv)
    found = [f for f in run(Context(pair)) if f.rule == "SP901"]
    assert bool(found) is fails
    if fails:
        assert 'kv_cache_dtype="float16" is incompatible with dtype="bfloat16"' in \
            found[0].message


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize(("method", "fails"), [("bogus", True), ("fp8", False)])
def test_a_quantization_the_engine_does_not_know_fails(engine: str, method: str,
                                                       fails: bool) -> None:
    pair = make_pair(dense(32), dense(1), engine=engine,
                     version="0.5.23" if engine == "sglang" else "0.33.0",
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 3})
    pair = with_runbook(pair, target={"quantization": method})
    rules = {f.rule: f.message for f in failing(run(Context(pair)))}
    assert ("SP901" in rules and repr(method) in rules["SP901"]) is fails


def test_the_draft_context_override_is_never_set_past_the_targets_positions() -> None:
    from specpair.analyse.launch import build_for

    pair = make_pair(dense(32), dense(1).model_copy(update={"max_position_embeddings": 2048}),
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 3})
    inside = with_runbook(pair, deployment={"context_length": 8192})
    beyond = with_runbook(pair, deployment={"context_length": 65536})  # target: 40960
    assert build_for(inside).env == {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    assert build_for(beyond).env == {}
