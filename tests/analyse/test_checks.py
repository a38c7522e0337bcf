"""The pre-deployment gate: every rule fails on one fixture and passes on another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from specpair.analyse.checks.gate import RULES, Context, failing, run
from specpair.model.lock import VocabMapping
from specpair.resolve.pair import ResolvedPair
from tests.support.engine_verdicts import engine_answered
from tests.support.geometries import dense
from tests.support.pairs import DRAFT, SHA, good, make_pair, with_runbook
from tests.support.paths import REPO, write
from tests.support.vocab import hetero, mapping


def findings(pair: ResolvedPair, **ctx: Any) -> set[str]:
    return {f.rule for f in run(Context(pair, **ctx))}


def _draft(pair: ResolvedPair, **geometry: Any) -> ResolvedPair:
    assert pair.draft is not None
    draft = pair.draft.model_copy(update={"geometry": pair.draft.geometry.model_copy(
        update=geometry)})
    return pair.model_copy(update={"draft": draft})


def _artifact(pair: ResolvedPair, role: str, **update: Any) -> ResolvedPair:
    art = getattr(pair, role)
    return pair.model_copy(update={role: art.model_copy(update=update)})


def _tokenizer(pair: ResolvedPair, fingerprint: str) -> ResolvedPair:
    assert pair.draft is not None
    tok = pair.draft.tokenizer.model_copy(update={"fingerprint": fingerprint})
    return _artifact(pair, "draft", tokenizer=tok)


def _waive(pair: ResolvedPair, rule: str) -> ResolvedPair:
    data = pair.runbook.model_dump(mode="json")
    data["waivers"] = [{"rule": rule, "reason": "a reason long enough to pass"}]
    return pair.model_copy(update={"runbook": pair.runbook.model_validate(data)})


def _unverified_target() -> ResolvedPair:
    return _artifact(good(), "target", geometry=dense(36).model_copy(
        update={"architecture": "DeciLMForCausalLM"}))


def _hetero(m: VocabMapping | None) -> ResolvedPair:
    return hetero().model_copy(update={"vocab_mapping": m})


def _hetero_same_tokenizer() -> ResolvedPair:
    pair = _hetero(mapping())
    assert pair.draft is not None
    tokenizer = pair.draft.tokenizer.model_copy(update={"fingerprint": "sha256:" + "e" * 64})
    return pair.model_copy(update={
        "target": pair.target.model_copy(update={"tokenizer": tokenizer}),
        "draft": pair.draft.model_copy(update={"tokenizer": tokenizer})})


FP = "sha256:" + "a" * 64
def _two_nodes() -> ResolvedPair:
    """A TP8 replica over two 4-GPU nodes: the step model refuses it by name."""
    from tests.support.multinode import vllm_two_nodes

    return vllm_two_nodes()


BREAKERS: dict[str, Callable[[], tuple[ResolvedPair, dict[str, Any]]]] = {
    "SP101": lambda: (with_runbook(good(), target={"revision": "main"}), {}),
    "SP102": lambda: (good(), {"problems": ["the lock is stale: repo"]}),
    "SP103": lambda: (good(), {"drift": ["target: org/target@main moved"]}),
    "SP104": lambda: (_artifact(good(), "target", unconfirmed=["geometry"]), {}),
    "SP201": lambda: (_draft(good(), vocab_size=128256), {}),
    "SP202": lambda: (_tokenizer(_artifact(good(), "target", tokenizer=good().target.tokenizer
                                           .model_copy(update={"fingerprint": FP})),
                                 "sha256:" + "b" * 64), {}),
    "SP203": lambda: (_hetero(None), {}),
    "SP204": lambda: (_hetero(mapping(intersection=99)), {}),
    "SP205": lambda: (_hetero(mapping()), {}),
    "SP206": lambda: (_hetero(mapping()), {}),
    "SP207": lambda: (_hetero_same_tokenizer(), {}),
    "SP301": lambda: (_draft(good(), target_layer_ids=[1, 9, 17, 25, 40]), {}),
    "SP302": lambda: (with_runbook(good(), codesign={"feature_layers": [2, 10, 18, 26, 34]}),
                      {}),
    "SP303": lambda: (with_runbook(good(), speculation={"block_size": 8}), {}),
    "SP304": lambda: (_draft(good(), hidden_size=2560, num_attention_heads=32,
                             head_dim=80, v_head_dim=80), {}),
    "SP305": lambda: (_draft(good(), mask_token_id=200000), {}),
    "SP306": lambda: (_draft(good(), verifier="org/another-model"), {}),
    "SP401": lambda: (with_runbook(good(), deployment={"context_length": 65536}), {}),
    "SP501": lambda: (with_runbook(good(), deployment={"parallel": {"tensor": 3}}), {}),
    "SP502": lambda: (with_runbook(make_pair(dense(36), dense(2), engine="vllm",
                                             version="0.33.0", speculation={
                                                 "method": "STANDALONE",
                                                 "num_speculative_tokens": 3}),
                                   deployment={"parallel": {"tensor": 4, "draft_tensor": 2}}),
                      {}),
    "SP601": lambda: (make_pair(dense(36), DRAFT, speculation={"method": "DSPARK",
                                                               "block_size": 7},
                                target_bytes=90 << 30), {}),
    "SP602": lambda: (good(), {}),
    # an architecture the KV oracle has not verified (Nemotron-NAS's DeciLM class)
    "SP603": lambda: (with_runbook(_unverified_target(), deployment={
        "assumptions": {"unverified_layouts": ["DeciLMForCausalLM"]}}), {}),
    "SP604": lambda: (_unverified_target(), {}),
    "SP605": lambda: (engine_answered(good(), differs=True), {}),
    # vLLM's Gemma 3 multimodal class lacks SupportsEagle3 (the release's method_support.yaml)
    "SP308": lambda: (_artifact(make_pair(dense(36), dense(1), engine="vllm",
                                          version="0.33.0", speculation={
                                              "method": "EAGLE3", "num_speculative_tokens": 3}),
                                "target", geometry=dense(36).model_copy(update={
                                    "architecture": "Gemma3ForConditionalGeneration"})), {}),
    "SP701": lambda: (with_runbook(good(), acceptance={"slo": {"min_length": 1.01}},
                                   deployment={"concurrency": 256}), {}),
    "SP702": lambda: (good(), {}),
    "SP703": lambda: (_two_nodes(), {}),
    "SP801": lambda: (with_runbook(good(), staging={"mode": "engine-overlap"}), {}),
    "SP802": lambda: (with_runbook(good(), staging={"cold_start_budget_s": 5}), {}),
    "SP901": lambda: (with_runbook(good(), deployment={"kv_cache_dtype": "fp16"}), {}),
    "SP001": lambda: (_waive(good(), "SP303"), {}),
    "SP105": lambda: (_artifact(good(), "draft", provenance="declared"), {}),
    "SP307": lambda: (_draft(make_pair(dense(36, hidden=5120), dense(1), speculation={
        "method": "EAGLE3", "num_speculative_tokens": 3}), hidden_size=4096), {}),
    # a DSpark draft launched as EAGLE-3; a one-layer head under its base architecture
    "SP309": lambda: (make_pair(dense(36), DRAFT, speculation={
        "method": "EAGLE3", "num_speculative_tokens": 3}), {}),
    "SP310": lambda: (make_pair(dense(36), dense(1), speculation={
        "method": "EAGLE3", "num_speculative_tokens": 3}), {}),
    "SP402": lambda: (with_runbook(good(), deployment={"context_length": 131072}), {}),
    "SP902": lambda: (make_pair(dense(36), dense(1, kv_heads=8).model_copy(
        update={"num_nextn_predict_layers": 1}), engine="vllm", version="0.33.0",
        speculation={"method": "MTP", "num_speculative_tokens": 3}), {}),
}


def passing() -> ResolvedPair:
    # own_traffic with the provenance `specpair slo propose --write` gives it (SP702)
    provenance = {"source": "record", "reference": "20261201T100500Z.json",
                  "start": "2026-12-01T10:00:00Z", "end": "2026-12-01T10:05:00Z",
                  "samples": 400, "value": 3.3, "interval_low": 3.2, "interval_high": 3.4,
                  "margin": 0.05}
    pair = with_runbook(good(), acceptance={"slo": {"min_length": 3.0, "basis": "own_traffic",
                                                    "provenance": provenance}},
                        codesign={"feature_layers": [1, 9, 17, 25, 33], "block_size": 7})
    return pair


def test_every_rule_has_a_breaking_fixture() -> None:
    assert sorted(BREAKERS) == sorted(r.id for r in RULES)
    assert len({r.id for r in RULES}) == len(RULES)
    assert all(r.why and r.title for r in RULES)


@pytest.mark.parametrize("rule", sorted(BREAKERS))
def test_rule_fails_on_its_fixture(rule: str) -> None:
    pair, ctx = BREAKERS[rule]()
    assert rule in findings(pair, **ctx)


@pytest.mark.parametrize("rule", sorted(r for r in BREAKERS if r not in ("SP602", "SP205")))
def test_rule_passes_on_a_healthy_pair(rule: str) -> None:
    assert rule not in findings(passing())


def test_the_draft_share_note_is_silent_without_a_draft_pool() -> None:
    pair = make_pair(dense(36), None, speculation={"method": "NGRAM",
                                                   "num_speculative_tokens": 3})
    assert "SP602" not in findings(pair)
    assert "SP602" in findings(passing())


def test_waiver_keeps_the_finding_but_not_the_failure() -> None:
    pair = with_runbook(passing(), target={"revision": "main"})
    assert [f.rule for f in failing(run(Context(pair)))] == ["SP101"]
    data = pair.runbook.model_dump(mode="json")
    data["waivers"] = [{"rule": "SP101", "reason": "pinned on the first hub lock"}]
    waived = pair.model_copy(update={"runbook": pair.runbook.model_validate(data)})
    results = run(Context(waived))
    assert any(f.rule == "SP101" and f.waived for f in results)
    assert failing(results) == []


LING_ON_QWEN = """\
pair: {name: ling-draft-on-qwen, title: A wrong pairing, owner: tests}
engine: {name: sglang, version: 0.5.23}
target: {repo: Qwen/Qwen3-32B, revision: %(sha)s}
draft: {repo: inclusionAI/Ling-3.0-flash-dspark, revision: %(sha)s}
speculation: {method: DSPARK, block_size: 8}
deployment: {gpu: H200-141GB, parallel: {tensor: 2}, context_length: 32768}
acceptance: {slo: {min_length: 4.0}}
codesign: {feature_layers: [1, 16, 31, 46, 61], block_size: 8}
"""


def test_ling_dspark_draft_on_qwen3_32b_fails_on_hidden_size_and_layers(tmp_path: Path) -> None:
    folder = tmp_path / "runbooks" / "ling-draft-on-qwen"
    write(folder / "runbook.yaml", LING_ON_QWEN % {"sha": SHA})
    ling = json.loads((REPO / "runbooks/ling-3-flash-dspark/lock.json").read_text())["draft"]
    ling["source"] = {"repo": "inclusionAI/Ling-3.0-flash-dspark", "revision": SHA}
    from specpair.model.config_geometry import from_hf_config
    from tests.support.paths import FIXTURES

    qwen = from_hf_config(json.loads((FIXTURES / "configs/Qwen__Qwen3-32B/config.json")
                                     .read_text()))
    target = {"source": {"repo": "Qwen/Qwen3-32B", "revision": SHA}, "provenance": "declared",
              "geometry": qwen.model_dump(mode="json"), "download_bytes": 65_600_000_000,
              "weights": {"params_by_dtype": {"BF16": 32_800_000_000},
                          "weight_bytes": 65_600_000_000, "provenance": "declared"},
              "tokenizer": {"vocab_size": 151_936, "provenance": "declared"}}
    write(folder / "lock.json", json.dumps({"pair": "ling-draft-on-qwen", "target": target,
                                            "draft": ling}))
    result = subprocess.run([sys.executable, "-m", "specpair", "check", "runbooks"],
                            cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    out = result.stdout
    assert "SP304 [error] draft hidden size 2560 ≠ target hidden size 5120: the first " \
           "request will fail" in out
    assert "SP302 [error] the draft reads target layers [1, 11, 23, 29, 35], the runbook " \
           "declares [1, 16, 31, 46, 61]" in out
    assert "SP201 [error] vocab sizes differ: target 151936, draft 157184" in out


def test_examples_pass_the_gate_with_justified_waivers() -> None:
    result = subprocess.run([sys.executable, "-m", "specpair", "check", "runbooks"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    assert "0 failing finding(s)" in result.stdout


def test_sarif_output_validates_against_the_sarif_2_1_0_schema(tmp_path: Path) -> None:
    schema_path = os.environ.get("SPECPAIR_SARIF_SCHEMA")
    assert schema_path, ("the tests session provides the SARIF 2.1.0 schema "
                         "(nox -s tests fetches it from the npm registry)")
    schema = json.loads(Path(schema_path).read_text())
    out = tmp_path / "check.sarif"
    subprocess.run([sys.executable, "-m", "specpair", "check", "runbooks", "--format",
                    "sarif", "--output", str(out)], cwd=REPO, check=True,
                   capture_output=True)
    log = json.loads(out.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    results = log["runs"][0]["results"]
    assert results and all(r["locations"][0]["physicalLocation"]["region"]["startLine"] > 0
                           for r in results)
    assert any(r.get("suppressions") for r in results)  # waivers are suppressions
    # a broken document must not validate: the schema really constrains the output
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validators.validator_for(schema)(schema).validate(
            {**log, "version": "1.0"})
