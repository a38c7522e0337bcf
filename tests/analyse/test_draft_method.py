"""The method a draft was trained for (model/draft_method.py) and gate rules SP309/SP310:
read from published draft configs whose method their sources name, held against every
example pair (real pairs: each passes) and against the examples launched under another
method (each fails with SP309, in the engine's words where the engine checks)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.analyse.checks.gate import Context, run
from specpair.engines.draft_method_words import vllm_draft_architecture
from specpair.model.common import Method
from specpair.model.config_geometry import from_hf_config
from specpair.model.draft_method import classify
from specpair.model.findings import Finding
from specpair.resolve.pair import ResolvedPair
from tests.support.examples import example
from tests.support.geometries import dense
from tests.support.pairs import make_pair
from tests.support.paths import REPO

CORPUS = REPO / "tests" / "fixtures" / "corpus"
CONFIGS = REPO / "tests" / "fixtures" / "configs"

# SOURCES.json `draft_method` (from the repositories' names and cards) → specpair's method;
# None: a draft kind no specpair method runs, which may only be classified unknown
SOURCE_METHOD: dict[str, Method | None] = {
    "EAGLE": Method.EAGLE, "EAGLE-3": Method.EAGLE3, "DFlash": Method.DFLASH,
    "Domino (DFlash variant)": Method.DFLASH, "DSpark": Method.DSPARK, "MTP": Method.MTP,
    "P-EAGLE": None, "HASS": None}

# the drafts whose config does not say their method (SP310), each with the reason
UNKNOWN = {
    # one-layer heads published under the base architecture, no draft vocabulary
    **dict.fromkeys((f"SafeAILab__EAGLE-train-{n}" for n in (
        "EAGLE-LLaMA3-Instruct-70B", "EAGLE-LLaMA3-Instruct-8B", "llama_2_chat_13B_config",
        "llama_2_chat_70B_config", "llama_2_chat_7B_config", "vicuna_13B_config",
        "vicuna_33B_config", "vicuna_7B_config")), "one-layer"),
    **dict.fromkeys((f"vllm-project__speculators-{n}" for n in (
        "eagle3-llama3_8_B", "Eagle3Deepspeed-llama3_8_B", "Eagle3Deepspeed-qwen3config",
        "hass-llama3_1_8_B", "hass-mistral_spec_config")), "one-layer"),
    "sgl-project__SpecForge-qwen3-8b-peagle": "PEagleDraftModel",
    "sgl-project__SpecForge-qwen3.5-4b-domino": "DominoDraftModel",
    "vllm-project__speculators-examples-kimi_k3_dspark-k3_draft_layer_config":
        "no architecture",
}
# configs the lock cannot be written from (transformers refuses them): not classified
UNREADABLE = {"sgl-project__SpecForge-qwen2.5-7b-eagle3"}

# tests/fixtures/configs has no machine-readable method: its folder names say it
CONFIGS_METHOD = {
    "nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted": Method.EAGLE3,
    "SafeAILab__EAGLE-traineagle3": Method.EAGLE3,
    "sgl-project__SpecForge-llama3-70B-ealge3": Method.EAGLE3,
    "sgl-project__SpecForge-llama3-8B-eagle3": Method.EAGLE3,
    "sgl-project__SpecForge-qwen3-8b-eagle3": Method.EAGLE3,
    "sgl-project__SpecForge-qwen3-8b-dflash": Method.DFLASH,
    "sgl-project__SpecForge-qwen3-8b-dspark": Method.DSPARK,
}


def _corpus_drafts() -> list[tuple[str, str]]:
    sources = json.loads((CORPUS / "SOURCES.json").read_text())
    return [(e["folder"], e["draft_method"]) for e in sources if e["role"] == "draft"]


def _config(folder: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((folder / "config.json").read_text())
    return config


def test_the_corpus_has_the_drafts_this_test_names() -> None:
    folders = {f for f, _ in _corpus_drafts()}
    assert len(folders) == 55 and set(UNKNOWN) | UNREADABLE <= folders
    assert {m for _, m in _corpus_drafts()} == set(SOURCE_METHOD)


@pytest.mark.parametrize(("folder", "named"), _corpus_drafts())
def test_corpus_drafts_are_read_as_their_sources_name_them(folder: str, named: str) -> None:
    config = _config(CORPUS / folder)
    if folder in UNREADABLE:
        with pytest.raises(ValueError):
            from_hf_config(config)
        return
    trained = classify(from_hf_config(config))
    if folder in UNKNOWN:
        assert not trained.known and UNKNOWN[folder] in trained.evidence, trained
    else:
        assert trained.methods == {SOURCE_METHOD[named]}, (trained, named)


@pytest.mark.parametrize(("folder", "method"), sorted(CONFIGS_METHOD.items()))
def test_config_fixture_drafts_are_read_as_named(folder: str, method: Method) -> None:
    assert classify(from_hf_config(_config(CONFIGS / folder))).methods == {method}


def test_built_in_layers_and_standalone_models() -> None:
    target = from_hf_config(_config(CONFIGS / "deepseek-ai__DeepSeek-V3"))
    assert classify(target, bundled=True).methods == {Method.MTP}
    assert not classify(dense(36), bundled=True).known
    assert classify(from_hf_config(_config(CORPUS / "Qwen__Qwen3-0.6B"))).methods == {
        Method.STANDALONE}
    # an EAGLE (not EAGLE-3) head under SGLang's own class name
    assert classify(dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle"})
                    ).methods == {Method.EAGLE}
    # NVIDIA's Eagle 2.5 is a vision-language model, not an EAGLE head: left unknown
    assert not classify(dense(24).model_copy(update={
        "architecture": "Eagle2_5_VLForConditionalGeneration"})).known


EXAMPLES = sorted(p.name for p in (REPO / "runbooks").iterdir()
                  if (p / "lock.json").is_file())


def _rules(pair: ResolvedPair, *ids: str) -> list[Finding]:
    return [f for f in run(Context(pair)) if f.rule in ids]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_pair_passes(name: str) -> None:
    pair = example(name)
    assert not _rules(pair, "SP309", "SP310")
    if pair.draft is not None:
        assert pair.runbook.speculation.method in classify(
            pair.draft.geometry, bundled=pair.draft.bundled).methods


def _as(pair: ResolvedPair, speculation: dict[str, Any]) -> ResolvedPair:
    data = pair.runbook.model_dump(mode="json")
    data["speculation"] = speculation
    return pair.model_copy(update={"runbook": pair.runbook.model_validate(data)})


EAGLE = {"method": "EAGLE", "num_steps": 5, "topk": 4, "num_draft_tokens": 8}
EAGLE3 = {"method": "EAGLE3", "num_speculative_tokens": 3}
MISMATCHED = {
    # an EAGLE-3 head under EAGLE: SGLang starts and accepts nothing
    ("llama31-8b-eagle3", "EAGLE"): (
        EAGLE, "LlamaForCausalLMEagle3.forward): it runs with no error"),
    # vLLM renames it to a class no release registers
    ("llama33-70b-eagle3-vllm", "EAGLE"): (
        {"method": "EAGLE", "num_speculative_tokens": 3},
        "\"Model architectures ['EagleLlamaForCausalLMEagle3'] are not supported for now.\""),
    ("llama33-70b-eagle3-vllm-0-32-0", "DFLASH"): (
        {"method": "DFLASH", "block_size": 16}, "'DFlashLlamaForCausalLMEagle3'"),
    # a DFlash draft under EAGLE-3
    ("qwen3-8b-dflash", "EAGLE3"): (
        EAGLE3, "loads DFlashDraftModel under --speculative-algorithm EAGLE3"),
    # built-in MTP layers launched as a standalone model
    ("deepseek-v3-mtp", "STANDALONE"): (
        {"method": "STANDALONE", "num_speculative_tokens": 3}, "does not compare them"),
    ("ling-3-flash-dspark", "DFLASH"): ({"method": "DFLASH", "block_size": 8},
                                        "trained for DSPARK"),
    # a standalone small model under EAGLE-3 (vLLM renames it to Eagle3Qwen2ForCausalLM)
    ("llama31-8b-qwen25-tli-vllm", "EAGLE3"): (EAGLE3, "Eagle3Qwen2ForCausalLM"),
}


@pytest.mark.parametrize(("name", "method"), sorted(MISMATCHED))
def test_examples_under_another_method_fail(name: str, method: str) -> None:
    speculation, words = MISMATCHED[(name, method)]
    pair = _as(example(name), speculation)
    (found,) = _rules(pair, "SP309")
    assert found.severity == "error" and words in found.message, found.message
    assert found.field == "speculation.method"
    own = classify(pair.draft.geometry, bundled=pair.draft.bundled) if pair.draft else None
    assert own is not None and f"speculation.method: {min(m.value for m in own.methods)}" \
        in found.hint


def test_vllm_0_34_0_refuses_a_dflash_draft_with_its_declared_speculator() -> None:
    draft = from_hf_config(_config(CONFIGS / "sgl-project__SpecForge-qwen3-8b-dflash"))
    pair = make_pair(from_hf_config(_config(CONFIGS / "Qwen__Qwen3-8B")), draft,
                     engine="vllm", version="0.34.0", speculation=EAGLE3)
    (found,) = _rules(pair, "SP309")
    assert "speculative_config requested method='eagle3', but the draft model ... is a " \
           "'dflash' checkpoint" in found.message, found.message


def test_an_eagle_head_under_eagle3_and_an_unknown_head() -> None:
    head = dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle"})
    pair = make_pair(dense(36), head, engine="vllm", version="0.33.0", speculation=EAGLE3)
    (found,) = _rules(pair, "SP309")
    assert "'Eagle3LlamaForCausalLMEagle'" in found.message
    # a one-layer head without marks: a warning that says what was not checked
    pair = make_pair(dense(36), dense(1), speculation=EAGLE3)
    (found,) = _rules(pair, "SP309", "SP310")
    assert found.rule == "SP310" and found.severity == "warning"
    assert found.message.startswith("not checked whether the draft was trained for EAGLE3")


@pytest.mark.parametrize(("method", "architecture", "renamed"), [
    ("eagle", "LlamaForCausalLM", "EagleLlamaForCausalLM"),
    ("eagle", "LlamaForCausalLMEagle3", "EagleLlamaForCausalLMEagle3"),
    ("eagle3", "LlamaForCausalLMEagle3", "LlamaForCausalLMEagle3"),
    ("eagle3", "Eagle3Speculator", "Eagle3Speculator"),
    ("eagle3", "DFlashDraftModel", "Eagle3DFlashDraftModel"),
    ("dflash", "DFlashDraftModel", "DFlashDraftModel"),
    ("draft_model", "LlamaForCausalLMEagle3", "LlamaForCausalLMEagle3"),
])
def test_vllm_renames_as_eagle_config_does(method: str, architecture: str,
                                           renamed: str) -> None:
    assert vllm_draft_architecture(method, architecture) == renamed
