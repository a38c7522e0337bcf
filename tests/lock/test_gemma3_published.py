"""Gemma 3's published config.json, unchanged, locks and passes the gate.

The file (tests/fixtures/corpus/sgl-project__ome-testdata-gemma3, a verbatim copy of
google/gemma-3-27b-it's config.json; SOURCES.json says where from) names only a few keys:
no `vocab_size`, `max_position_embeddings` or `layer_types`. Hand parsing refused it, and
once those were added by hand it read the context as 2048 and failed SP402 falsely. Here
`specpair lock` reads it from a local hub server through the real huggingface_hub client,
and every expected fact comes from transformers' own Gemma3Config, the class both engines
instantiate; tests/engine/test_kv_oracle.py checks its budget against both engines' code.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specpair.model.geometry import Geometry
from tests.support import proc
from tests.support.hub_lock import lock
from tests.support.hubserver import HubServer, Repo
from tests.support.paths import FIXTURES, write

FOLDER = FIXTURES / "corpus" / "sgl-project__ome-testdata-gemma3"
REPO_ID = "google/gemma-3-27b-it"
# bf16 weights of the 27B checkpoint: any positive size does; only the index's total counts
TOTAL_SIZE = 54_867_349_504
ENGINES = (("sglang", "0.5.23"), ("vllm", "0.33.0"))
# its EAGLE-3 draft as SpecForge trains it (tests/fixtures/corpus, draft_of this model)
DRAFT_FOLDER = "sgl-project__SpecForge-gemma3-27b-eagle3"
DRAFT_ID = "sgl-project/SpecForge-gemma3-27b-eagle3"
DRAFT_SIZE = 2_000_000_000


def published() -> bytes:
    raw = (FOLDER / "config.json").read_bytes()
    entry = next(e for e in json.loads((FIXTURES / "corpus" / "SOURCES.json").read_text())
                 if e["folder"] == FOLDER.name)
    assert hashlib.sha256(raw).hexdigest() == entry["sha256"], "not the copied file"
    return raw


def transformers_text_config() -> Any:
    """The decoder config both engines see: transformers' Gemma3Config of the file."""
    from transformers import Gemma3Config

    return Gemma3Config.from_dict(json.loads(published())).get_text_config()


def index(total_size: int) -> bytes:
    """A shard index: air-gapped planning locks from it instead of the shards."""
    return json.dumps({"metadata": {"total_size": total_size}, "weight_map": {}}).encode()


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    with HubServer() as hub:
        hub.repos[REPO_ID] = Repo()
        commit = hub.repos[REPO_ID].commit({"config.json": published(),
                                            "model.safetensors.index.json": index(TOTAL_SIZE)})
        hub.repos[DRAFT_ID] = Repo()
        draft = hub.repos[DRAFT_ID].commit({
            "config.json": (FIXTURES / "corpus" / DRAFT_FOLDER / "config.json").read_bytes(),
            "model.safetensors.index.json": index(DRAFT_SIZE)})
        root = tmp_path / "repo"
        for engine, version in ENGINES:
            for method in ("NGRAM", "EAGLE3"):
                name = f"gemma3-{method.lower()}-{engine}"
                draft_line = f"draft: {{repo: {DRAFT_ID}, revision: {draft}}}\n" \
                    if method == "EAGLE3" else ""
                order = "[draft, target]" if method == "EAGLE3" else "[target]"
                write(root / "runbooks" / name / "runbook.yaml", f"""\
pair: {{name: {name}, title: Gemma 3 27B, owner: tests}}
engine: {{name: {engine}, version: {version}}}
target: {{repo: {REPO_ID}, revision: {commit}}}
{draft_line}speculation: {{method: {method}, num_speculative_tokens: 3}}
deployment: {{gpu: H200-141GB, context_length: 131072, parallel: {{tensor: 2}}}}
acceptance: {{slo: {{min_length: 1.5}}}}
staging: {{order: {order}}}
""")
        result = lock(root, hub, "runbooks")
        assert result.returncode == 0, result.stderr
        yield root


def findings(repo: Path) -> dict[str, list[str]]:
    """runbook name → the rule ids `specpair check` reports on it."""
    result = proc.run([sys.executable, "-m", "specpair", "check", "runbooks"],
                            cwd=repo, capture_output=True, text=True, check=False, cpu_s=300)
    assert "4 pair(s) checked" in result.stdout, result.stdout + result.stderr
    found: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("runbooks/"):
            found.setdefault(line.split("/")[1], []).append(line.split(": ", 1)[1])
    return found


def test_the_unchanged_file_has_none_of_the_keys_hand_parsing_needed() -> None:
    config = json.loads(published())
    text = config["text_config"]
    assert config["architectures"] == ["Gemma3ForConditionalGeneration"]
    for key in ("vocab_size", "max_position_embeddings", "layer_types",
                "sliding_window_pattern", "num_key_value_heads"):
        assert key not in config
    assert {"vocab_size", "max_position_embeddings", "layer_types"}.isdisjoint(text)


def test_lock_reads_it_through_transformers_gemma3_config(repo: Path) -> None:
    expected = transformers_text_config()
    for engine, _ in ENGINES:
        data = json.loads((repo / "runbooks" / f"gemma3-ngram-{engine}" / "lock.json")
                          .read_text())
        target = data["target"]
        g = target["geometry"]
        # a run of identical layers is written once with `repeat`; the lock's own loader
        # expands it (its round trip is tests/model/test_layer_runs.py)
        g["layers"] = [layer.model_dump() for layer in Geometry.model_validate(g).layers or []]
        assert target["sources"]["geometry"] == (
            f"config.json through transformers 5.19.0 {type(expected).__name__}")
        kinds = {"sliding_attention": "sliding", "full_attention": "full"}
        assert [la["kind"] for la in g["layers"]] == [kinds[t] for t in expected.layer_types]
        assert {la["window"] for la in g["layers"] if la["kind"] == "sliding"} == {
            expected.sliding_window}
        assert {(la["kv_heads"], la["head_dim"]) for la in g["layers"]} == {
            (expected.num_key_value_heads, expected.head_dim)}
        assert g["num_hidden_layers"] == expected.num_hidden_layers
        assert g["max_position_embeddings"] == expected.max_position_embeddings
        assert g["vocab_size"] == expected.vocab_size
        assert target["weights"]["weight_bytes"] == TOTAL_SIZE


def test_it_budgets_at_the_full_context_and_the_gate_raises_nothing_on_it(repo: Path) -> None:
    # 131072 positions (transformers' default) is what both engines allow: a default of
    # 2048 fails SP402 here; a layout refused or unverified fails SP604 or SP603
    assert transformers_text_config().max_position_embeddings == 131072
    found = findings(repo)
    # the lock from a shard index lists its parameter count as unconfirmed (SP104, a
    # warning; not SP105: a resolution may leave it unread) and NGRAM's provisional SLO is
    # its own matter (SP701/SP702): none is about the config
    for engine, _ in ENGINES:
        rules = " ".join(found[f"gemma3-ngram-{engine}"])
        for rule in ("SP105", "SP402", "SP501", "SP601", "SP603", "SP604"):
            assert rule not in rules, (engine, rules)
        budget = proc.run(
            [sys.executable, "-m", "specpair", "budget",
             f"runbooks/gemma3-ngram-{engine}/runbook.yaml", "--json"],
            cwd=repo, capture_output=True, text=True, check=False, cpu_s=300)
        assert budget.returncode == 0, budget.stderr
        data = json.loads(budget.stdout)
        assert not data.get("unverified"), data["unverified"]
        assert data["baseline"]["fits"] and data["baseline"]["cell_target"] > 0


def test_eagle3_on_it_fails_the_gate_only_where_the_engine_cannot_load_it(repo: Path) -> None:
    # vLLM 0.33.0's Gemma3ForConditionalGeneration lacks the SupportsEagle3 interface;
    # SGLang 0.5.23's class has set_eagle3_layers_to_capture (the release's method_support.yaml,
    # checked against both engines' registries by tests/engine/test_method_support.py)
    found = findings(repo)
    vllm = [f for f in found["gemma3-eagle3-vllm"] if f.startswith("SP308")]
    assert len(vllm) == 1 and '"Model does not support EAGLE3 interface"' in vllm[0], vllm
    assert not [f for f in found["gemma3-eagle3-sglang"] if f.startswith("SP308")]
