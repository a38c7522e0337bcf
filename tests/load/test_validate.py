"""`specpair validate`: the spec's rules, and every error with file:line:column."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from specpair.load.runbooks import load_runbook
from specpair.model.errors import SpecpairError
from tests.support.paths import REPO, write
from tests.support.runbooks import MINIMAL


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specpair", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def test_examples_are_valid() -> None:
    result = run_cli("validate", "runbooks")
    assert result.returncode == 0, result.stderr
    examples = len([d for d in (REPO / "runbooks").iterdir() if d.is_dir() and d.name != "lib"])
    assert examples >= 7  # the six pairs and the 70B pair pinned to vllm 0.32.0
    assert f"{examples} of {examples} runbook(s) valid" in result.stdout


def test_three_independent_errors_are_all_reported(tmp_path: Path) -> None:
    text = MINIMAL.replace("owner: me}", "owner: me, colour: red}") \
        .replace("method: DFLASH", "method: DFLASHH") \
        .replace("context_length: 32768", "context_length: -1")
    path = write(tmp_path / "runbooks" / "demo" / "runbook.yaml", text)
    result = run_cli("validate", str(path))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith(str(path))]
    assert len(lines) == 3, result.stderr
    located = {re.match(rf"{re.escape(str(path))}:(\d+):(\d+): (\S+):", line).groups()
               for line in lines}  # type: ignore[union-attr]
    assert located == {("1", "44", "pair.colour"), ("5", "23", "speculation.method"),
                       ("6", "46", "deployment.context_length")}
    assert "Traceback" not in result.stderr


def test_minimal_runbook_loads(tmp_path: Path) -> None:
    loaded = load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml", MINIMAL))
    assert loaded.runbook.speculation.block_size == 16
    # defaults a reviewer can rely on
    assert loaded.runbook.acceptance.slo.basis == "provisional"
    assert [w.kind for w in loaded.runbook.workloads] == ["short-homogeneous", "long-diverse"]


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path / "runbooks" / "demo" / "runbook.yaml", text)
    with pytest.raises(SpecpairError) as info:
        load_runbook(path)
    return [f"{p.location.field}: {p.message}" for p in info.value.problems]


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("version: 0.5.23", "version: 0.4.0", "engine.version: sglang 0.4.0 is not supported"),
    ("gpu: H100-80GB", "gpu: H1000", "deployment.gpu: unknown GPU 'H1000'"),
    ("name: demo", "name: other", "pair.name: pair name 'other' differs from its folder"),
    ("block_size: 16}", "block_size: 16, topk: 2}", "speculation.topk: DFLASH drafts a single"),
    ("method: DFLASH, block_size: 16", "method: DFLASH",
     "speculation.block_size: DFLASH needs the draft's block size"),
    ("method: DFLASH, block_size: 16", "method: EAGLE3",
     "speculation.num_speculative_tokens: EAGLE3 needs num_speculative_tokens"),
    ("method: DFLASH, block_size: 16", "method: EAGLE3, num_speculative_tokens: 3, "
     "num_draft_tokens: 5", "speculation.num_draft_tokens: with topk 1 the verify width is"),
    ("method: DFLASH, block_size: 16", "method: EAGLE3, topk: 4",
     "speculation.topk: a tree draft (topk > 1) needs num_steps and num_draft_tokens"),
    ("method: DFLASH, block_size: 16", "method: NGRAM, num_speculative_tokens: 3",
     "draft: NGRAM drafts from the prompt and takes no draft model"),
    ("target: {repo: Qwen/Qwen3-8B, revision: 0123456789abcdef0123456789abcdef01234567}",
     "target: {repo: Qwen/Qwen3-8B}", "target.revision: a hub artifact needs a pinned revision"),
    ("target: {repo: Qwen/Qwen3-8B,", "target: {path: /models/q, repo: Qwen/Qwen3-8B,",
     "target: give exactly one of repo"),
    ("context_length: 32768}", "context_length: 32768, parallel: {tensor: 16}}",
     "deployment.parallel: tensor × pipeline × data = 16 ranks, but the deployment has 8 GPUs"),
    ("context_length: 32768}", "context_length: 32768, parallel: {tensor: 2, expert: 3}}",
     "deployment.parallel.expert: expert parallel size 3 must divide"),
    ("context_length: 32768}", "context_length: 32768, parallel: {draft_tensor: 1}}",
     "deployment.parallel.draft_tensor: draft_tensor applies to vLLM only"),
])
def test_cross_field_rules(tmp_path: Path, old: str, new: str, expected: str) -> None:
    text = MINIMAL.replace(old, new)
    assert text != MINIMAL
    problems = _problems(tmp_path, text)
    assert any(p.startswith(expected) for p in problems), problems


def test_vllm_draft_tp_must_be_one_or_target_tp(tmp_path: Path) -> None:
    text = MINIMAL.replace("name: sglang, version: 0.5.23", "name: vllm, version: 0.33.0") \
        .replace("context_length: 32768}",
                 "context_length: 32768, parallel: {tensor: 4, draft_tensor: 2}}")
    problems = _problems(tmp_path, text)
    assert any("accepts draft TP 1 or the target's (4), not 2" in p for p in problems), problems


def test_bundled_draft_has_no_source_of_its_own(tmp_path: Path) -> None:
    text = MINIMAL.replace("draft: {repo: z-lab/Qwen3-8B-DFlash-b16,",
                           "draft: {bundled: true, repo: z-lab/Qwen3-8B-DFlash-b16,")
    problems = _problems(tmp_path, text)
    assert any(p.startswith("draft.repo: a bundled draft has no repo") for p in problems)


@pytest.mark.parametrize("bad", ["name: ../etc", "name: a/b", "name: Demo", "name: ''"])
def test_pair_names_are_safe_slugs(tmp_path: Path, bad: str) -> None:
    problems = _problems(tmp_path, MINIMAL.replace("name: demo", bad))
    assert any(p.startswith("pair.name:") and "wrong form" in p for p in problems), problems


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_nan_and_infinity_are_refused(tmp_path: Path, value: str) -> None:
    problems = _problems(tmp_path, MINIMAL.replace("min_length: 3.0", f"min_length: {value}"))
    assert any(p.startswith("acceptance.slo.min_length:") for p in problems), problems


@pytest.mark.parametrize("file", ["../other-pair/traffic.jsonl", "/dev/zero", "x/../../t.jsonl"])
def test_a_replay_file_outside_the_pair_folder_is_refused_at_its_field(
        tmp_path: Path, file: str) -> None:
    replay = (f"\nworkloads:\n  - {{name: short, kind: short-homogeneous, prompts: 4, "
              f"max_tokens: 8}}\n  - {{name: traffic, kind: replay, file: '{file}', "
              f"sha256: '{'a' * 64}'}}\n")
    problems = _problems(tmp_path, MINIMAL + replay)
    assert any(p.startswith("workloads[1].file: ") and "outside the pair's folder" in p
               for p in problems), problems


@pytest.mark.parametrize(("old", "new", "field", "hint"), [
    # vLLM's and SGLang's own spellings of a method
    ("method: DFLASH", "method: draft_model", "speculation.method",
     "did you mean `STANDALONE` (vLLM calls it draft_model)?"),
    ("method: DFLASH", "method: NEXTN", "speculation.method",
     "did you mean `MTP` (SGLang calls it NEXTN)?"),
    ("method: DFLASH", "method: dflash", "speculation.method", "did you mean `DFLASH`?"),
    # an engine as its project writes its name
    ("name: sglang", "name: SGLang", "engine.name", "did you mean `sglang`?"),
    ("name: sglang", "name: vLLM", "engine.name", "did you mean `vllm`?"),
    ("method: DFLASH", "method: speculate", "speculation.method",
     "use one of the listed values"),
])
def test_a_value_from_an_engines_own_words_gets_a_did_you_mean(
        tmp_path: Path, old: str, new: str, field: str, hint: str) -> None:
    """Issue 51: `draft_model` and "SGLang" were answered "use one of the listed values"."""
    path = write(tmp_path / "runbooks" / "demo" / "runbook.yaml", MINIMAL.replace(old, new))
    with pytest.raises(SpecpairError) as info:
        load_runbook(path)
    (problem,) = info.value.problems
    assert problem.location.field == field
    assert problem.hint == hint


def test_every_method_a_release_accepts_is_modelled_or_refused_by_name(
        tmp_path: Path) -> None:
    """Issue 54: each method a supported release accepts, as the release spells it (its
    engine_lists.yaml `speculative_methods`, which tests/engine/test_copied_decisions.py
    holds equal to the release's own code: vLLM's SpeculativeMethod literals, SGLang's
    SpeculativeAlgorithm names and aliases) is a method specpair models (the release's
    spelling of one), an MTP model type the release reads as MTP, or refused at its field
    naming the release that accepts it."""
    from specpair.engines import engine_lists
    from specpair.engines.registry import by_label, labels

    refused = {}
    for label in labels():
        lists = engine_lists.of(label)
        assert lists.speculative_methods, label
        spelled = set(by_label(label).profile.method_names.values())
        assert spelled <= lists.speculative_methods, (label, spelled)  # the release's own
        for word in sorted(lists.speculative_methods - spelled):
            path = write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
                         MINIMAL.replace("method: DFLASH", f"method: {word}"))
            with pytest.raises(SpecpairError) as info:
                load_runbook(path)
            (problem,) = info.value.problems
            assert problem.location.field == "speculation.method", word
            if word in lists.mtp_aliases:
                assert problem.hint.startswith("did you mean `MTP`?"), (word, problem.hint)
            else:
                assert "specpair does not model it" in problem.hint, (word, problem.hint)
            assert f"{label} (`{word}`)" in problem.hint, (word, problem.hint)
            refused[word] = problem.hint
    # vLLM's suffix decoding and SGLang's UNO among them: refused by name, not guessed
    assert {"suffix", "UNO", "FROZEN_KV_MTP"} <= set(refused), sorted(refused)
