"""The token-level intersection, as vLLM 0.33.0's VocabMapping computes it.

Expected values follow the engine's algorithm by hand on vocabularies small enough to
read (vllm/v1/spec_decode/vocab_mapping.py); tests/engine/test_heterogeneous_vocab.py
compares the same code with the engine's own VocabMapping and its start-up log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from specpair.lock.vocab import intersect, load_tokenizer, normalize
from specpair.model.errors import SpecpairError
from tests.support.checkpoints import llama_config, write_checkpoint
from tests.support.paths import write
from tests.support.tokenizers_pair import (
    BPE_SPECIAL,
    METASPACE_SPECIAL,
    byte_level_bpe,
    metaspace_bpe,
    tokenizer_files,
    write_tokenizer,
)


def word_level(vocab: dict[str, int], pre: object, special: dict[str, str]) -> dict[str, bytes]:
    tok = Tokenizer(models.WordLevel(vocab, unk_token=special.get("unk", "<unk>")))
    tok.pre_tokenizer = pre
    return tokenizer_files(tok, special)


BYTE = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
META = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")


def test_markers_are_probed_and_normalised_to_a_space() -> None:
    target = load_tokenizer(word_level({"\u0120a": 0, "\u0120b": 1, "c": 2, "</s>": 3},
                                       BYTE, {"eos": "</s>"}), "target")
    draft = load_tokenizer(word_level({"\u2581a": 0, "\u2581b": 1, "d": 2, "<unk>": 3,
                                       "</s>": 4}, META, {"unk": "<unk>", "eos": "</s>"}),
                           "draft")
    assert target.markers == ("\u0120",) and target.probed
    assert draft.markers == ("\u2581",) and draft.probed
    found = intersect(target, draft, 4, 5)
    # " a", " b" and "</s>"; "c", "d" and "<unk>" are in one vocabulary only
    assert (found.size, found.size_max) == (3, 3)
    assert (found.pct_of_draft, found.pct_of_target) == (60.0, 75.0)
    # target has no unk: the engine falls back to eos; the draft maps to its unk
    assert found.target_fallback == ("eos", 3) and found.draft_fallback == ("unk", 3)
    assert found.special_mapped == {"target eos </s>": True}
    assert found.refusal is None


def test_a_failed_probe_tries_both_markers() -> None:
    # " a" is not one token ending in "a" (here: unknown): the engine's fallback pair
    facts = load_tokenizer(word_level({"\u0120": 0, "a": 1, "\u2581x": 2, "</s>": 3,
                                       "<unk>": 4}, BYTE, {"eos": "</s>"}), "t")
    assert facts.markers == ("\u0120", "\u2581") and not facts.probed
    assert normalize("\u2581x", facts.markers) == " x"
    assert normalize("\u0120x", facts.markers) == " x"


def test_ids_beyond_the_config_vocab_size_do_not_count() -> None:
    target = load_tokenizer(word_level({"\u0120a": 0, "\u0120b": 1, "</s>": 2}, BYTE,
                                       {"eos": "</s>"}), "target")
    draft = load_tokenizer(word_level({"\u2581a": 0, "</s>": 1, "\u2581b": 2}, META,
                                      {"eos": "</s>"}), "draft")
    assert intersect(target, draft, 3, 3).size == 3
    assert intersect(target, draft, 3, 2).size == 2  # draft id 2 is past its embedding rows


def test_tokens_that_normalise_alike_give_a_range() -> None:
    # with both markers tried, "Ġa" and "▁a" both become " a": the engine keeps whichever
    # comes first in its dict order, and only one of them fits the bound
    target = load_tokenizer(word_level({"<unk>": 0, "a": 1, "\u2581a": 2, "</s>": 3,
                                        "\u0120a": 9}, pre_tokenizers.Whitespace(),
                                       {"eos": "</s>"}), "target")
    assert not target.probed
    draft = load_tokenizer(word_level({"\u2581a": 0, "</s>": 1}, META, {"eos": "</s>"}),
                           "draft")
    found = intersect(target, draft, 4, 2)
    assert (found.size, found.size_max) == (1, 2)


def test_no_unk_and_no_eos_is_the_engines_refusal() -> None:
    target = load_tokenizer(word_level({"\u0120a": 0}, BYTE, {}), "target")
    draft = load_tokenizer(word_level({"\u2581a": 0, "<unk>": 1}, META, {"unk": "<unk>"}),
                           "draft")
    found = intersect(target, draft, 1, 2)
    assert found.target_fallback is None
    assert found.refusal is not None and "target tokenizer has neither unk_token_id nor " \
        "eos_token_id" in found.refusal


def test_without_tokenizer_json_the_error_says_what_to_do() -> None:
    with pytest.raises(SpecpairError) as info:
        load_tokenizer({"tokenizer_config.json": b"{}"}, "ckpt")
    assert "no tokenizer.json" in str(info.value)


def test_trained_bpe_and_metaspace_tokenizers_overlap() -> None:
    target = load_tokenizer(tokenizer_files(byte_level_bpe(), BPE_SPECIAL), "target")
    draft = load_tokenizer(tokenizer_files(metaspace_bpe(), METASPACE_SPECIAL), "draft")
    assert target.markers == ("\u0120",) and draft.markers == ("\u2581",)
    found = intersect(target, draft, len(target.vocab), len(draft.vocab))
    # every word of the shared corpus is one token in both: ' the', ' quick', ...
    words = {" " + w for w in "quick brown fox lazy seven".split()}
    t_norm = {normalize(t, target.markers) for t in target.vocab}
    d_norm = {normalize(t, draft.markers) for t in draft.vocab}
    assert words <= t_norm & d_norm
    assert found.size == len(t_norm & d_norm)
    assert found.special_mapped["target eos </s>"]


RUNBOOK = """\
pair: {{name: het, title: Different tokenizers, owner: tests}}
engine: {{name: vllm, version: 0.33.0}}
target: {{path: {target}}}
draft: {{path: {draft}}}
speculation: {{method: STANDALONE, num_speculative_tokens: 3, heterogeneous_vocab: true}}
deployment: {{gpu: H100-80GB, context_length: 2048}}
acceptance: {{slo: {{min_length: 1.5}}}}
"""


def test_lock_pins_both_tokenizers_and_the_intersection(tmp_path: Path) -> None:
    target_files = tokenizer_files(byte_level_bpe(), BPE_SPECIAL)
    draft_files = tokenizer_files(metaspace_bpe(), METASPACE_SPECIAL)
    t_facts, d_facts = load_tokenizer(target_files, "t"), load_tokenizer(draft_files, "d")
    for name, files, vocab in (("target", target_files, len(t_facts.vocab)),
                               ("draft", draft_files, 160)):  # draft rows padded to 160
        write_checkpoint(tmp_path / name, llama_config(vocab=vocab, hidden=64, heads=4,
                                                       kv_heads=2, intermediate=128,
                                                       layers=1))
        write_tokenizer(tmp_path / name, files)
    folder = tmp_path / "runbooks" / "het"
    write(folder / "runbook.yaml", RUNBOOK.format(target=tmp_path / "target",
                                                 draft=tmp_path / "draft"))
    result = subprocess.run([sys.executable, "-m", "specpair", "lock", "runbooks"],
                            cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    lock = json.loads((folder / "lock.json").read_text())
    expected = intersect(t_facts, d_facts, len(t_facts.vocab), 160)
    mapping = lock["vocab_mapping"]
    assert mapping["intersection"] == expected.size
    assert (mapping["target_vocab"], mapping["draft_vocab"]) == (len(t_facts.vocab), 160)
    assert mapping["target_fallback"] == {"kind": "eos", "token_id": t_facts.special["eos"][1]}
    assert mapping["draft_fallback"] == {"kind": "unk", "token_id": d_facts.special["unk"][1]}
    assert mapping["target_markers"] == ["\u0120"] and mapping["draft_markers"] == ["\u2581"]
    for role in ("target", "draft"):
        assert lock[role]["tokenizer"]["fingerprint"].startswith("sha256:")
        assert lock[role]["tokenizer"]["files"] == ["tokenizer.json", "tokenizer_config.json"]
    assert lock["target"]["tokenizer"]["fingerprint"] != lock["draft"]["tokenizer"]["fingerprint"]
    assert mapping["target_tokenizer"] == lock["target"]["tokenizer"]["fingerprint"]
    assert mapping["draft_tokenizer"] == lock["draft"]["tokenizer"]["fingerprint"]
    check = subprocess.run([sys.executable, "-m", "specpair", "check", "runbooks"],
                           cwd=tmp_path, capture_output=True, text=True, check=False)
    assert "SP201" not in check.stdout and "SP202" not in check.stdout, check.stdout
    assert f"intersection={expected.size} " in check.stdout


HUB_RUNBOOK = """\
pair: {name: het, title: Different tokenizers, owner: tests}
engine: {name: vllm, version: 0.33.0}
target: {repo: org/target, revision: main}
draft: {repo: org/draft, revision: main}
speculation: {method: STANDALONE, num_speculative_tokens: 3, heterogeneous_vocab: true}
deployment: {gpu: H100-80GB, context_length: 2048}
acceptance: {slo: {min_length: 1.5}}
"""


def test_lock_from_the_hub_computes_the_same_intersection(tmp_path: Path) -> None:
    from tests.support.hub_lock import lock, publish
    from tests.support.hubserver import HubServer

    target_files = tokenizer_files(byte_level_bpe(), BPE_SPECIAL)
    draft_files = tokenizer_files(metaspace_bpe(), METASPACE_SPECIAL)
    t_facts, d_facts = load_tokenizer(target_files, "t"), load_tokenizer(draft_files, "d")
    for name, files in (("target", target_files), ("draft", draft_files)):
        write_checkpoint(tmp_path / name, llama_config(vocab=len(load_tokenizer(files, name)
                                                                 .vocab),
                                                       hidden=64, intermediate=128, layers=1))
        write_tokenizer(tmp_path / name, files)
    root = tmp_path / "repo"
    write(root / "runbooks" / "het" / "runbook.yaml", HUB_RUNBOOK)
    with HubServer() as hub:
        publish(hub, "org/target", tmp_path / "target")
        commit = publish(hub, "org/draft", tmp_path / "draft")
        result = lock(root, hub, "runbooks")
        assert result.returncode == 0, result.stderr
        mapping = json.loads((root / "runbooks" / "het" / "lock.json").read_text())[
            "vocab_mapping"]
        assert mapping["intersection"] == intersect(t_facts, d_facts, len(t_facts.vocab),
                                                    len(d_facts.vocab)).size
        assert mapping["provenance"] == f"hub@{commit}"
        asked = len(hub.requests)
        # offline: the locked intersection stays, nothing is asked
        assert lock(root, hub, "runbooks", "--offline").returncode == 0
        assert len(hub.requests) == asked
    again = json.loads((root / "runbooks" / "het" / "lock.json").read_text())["vocab_mapping"]
    assert again == mapping
