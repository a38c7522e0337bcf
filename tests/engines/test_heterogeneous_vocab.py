"""vLLM's heterogeneous-vocabulary mode (Token-Level Intersection): spec, command, rules.

The restrictions are vLLM 0.33.0's own (vllm/config/speculative.py `_verify_args`,
vllm/config/vllm.py V2-runner fallback, vllm/v1/spec_decode/draft_model.py); the real
parser and SpeculativeConfig field types are checked in tests/engine/test_parsers.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from specpair.analyse.checks.gate import Context, run
from specpair.analyse.launch import build_for
from specpair.model.lock import VocabMapping
from specpair.resolve.pair import ResolvedPair
from tests.support.geometries import dense
from tests.support.pairs import make_pair, with_runbook
from tests.support.vocab import PASSING, RESTRICTIONS, hetero, mapping


def spec_config(pair: ResolvedPair) -> dict[str, Any]:
    argv = [a for a in build_for(pair).argv if isinstance(a, str)]
    loaded: dict[str, Any] = json.loads(argv[argv.index("--speculative-config") + 1])
    return loaded


def preflight(pair: ResolvedPair, engine: str | None = None) -> dict[str, str]:
    return {p.field: p.message for p in build_for(pair, engine).errors}


def test_the_mode_and_its_draft_sampling_are_in_the_speculative_config() -> None:
    config = spec_config(hetero())
    assert config == {"method": "draft_model", "model": "org/draft", "revision": config[
        "revision"], "num_speculative_tokens": 4, "use_heterogeneous_vocab": True,
        "draft_sample_method": "greedy"}
    assert build_for(hetero()).errors == []
    # the mode needs the V1 model runner: pinned, so an inherited =1 cannot break the start
    assert build_for(hetero()).env["VLLM_USE_V2_MODEL_RUNNER"] == "0"


def test_a_shared_vocabulary_pair_carries_none_of_the_keys() -> None:
    pair = with_runbook(hetero(), speculation={"heterogeneous_vocab": False})
    config = spec_config(pair)
    assert not {"use_heterogeneous_vocab", "draft_sample_method",
                "use_local_argmax_reduction"} & set(config)
    assert "VLLM_USE_V2_MODEL_RUNNER" not in build_for(pair).env


@pytest.mark.parametrize("name", sorted(RESTRICTIONS))
def test_each_restriction_fails_its_fixture(name: str) -> None:
    field, change, words = RESTRICTIONS[name]
    pair = with_runbook(hetero(), **change)
    found = preflight(pair)
    assert field in found and words in found[field], found


@pytest.mark.parametrize("name", sorted(RESTRICTIONS))
def test_each_restriction_passes_its_fixture(name: str) -> None:
    assert preflight(with_runbook(hetero(), **PASSING[name])) == {}


def test_probabilistic_drafting_stays_available_without_the_mode() -> None:
    pair = with_runbook(hetero(), speculation={"heterogeneous_vocab": False,
                                               "draft_sample_method": "probabilistic"})
    assert preflight(pair) == {}
    assert spec_config(pair)["draft_sample_method"] == "probabilistic"


def test_request_temperature_is_not_restricted_by_the_mode() -> None:
    # greedy *drafting* is the limit, not greedy requests: a sampled workload is fine
    pair = with_runbook(hetero(), speculation={"draft_sample_method": "greedy"})
    data = pair.runbook.model_dump(mode="json")
    data["workloads"][0]["temperature"] = 0.8
    sampled = pair.model_copy(update={"runbook": pair.runbook.model_validate(data)})
    assert preflight(sampled) == {}


@pytest.mark.parametrize("key,value", [("heterogeneous_vocab", True),
                                       ("draft_sample_method", "greedy"),
                                       ("local_argmax_reduction", True)])
def test_sglang_has_no_such_mode(key: str, value: object) -> None:
    pair = make_pair(dense(36), dense(4), speculation={
        "method": "STANDALONE", "num_speculative_tokens": 4, key: value})
    found = preflight(pair)
    assert f"speculation.{key}" in found
    assert "sglang 0.5.23: has no " + key in found[f"speculation.{key}"]
    # the same runbook on vLLM: only the mode's own restrictions apply
    assert f"speculation.{key}" not in preflight(pair, "vllm 0.33.0")


# --------------------------------------------------------------------------- gate rules


def mapped(pair: ResolvedPair, m: VocabMapping | None) -> ResolvedPair:
    assert pair.draft is not None
    tokenizer = pair.draft.tokenizer.model_copy(update={"fingerprint": "sha256:" + "d" * 64})
    draft = pair.draft.model_copy(update={"tokenizer": tokenizer})
    return pair.model_copy(update={"vocab_mapping": m, "draft": draft})


def by_path(pair: ResolvedPair) -> ResolvedPair:
    """Both checkpoints served from staged paths: the engine reads exactly those files."""
    return with_runbook(pair, target={"repo": None, "revision": None, "path": "/models/t"},
                        draft={"repo": None, "revision": None, "path": "/models/d"})


def _same_tokenizers(pair: ResolvedPair) -> ResolvedPair:
    assert pair.draft is not None
    target = pair.target.model_copy(update={"tokenizer": pair.draft.tokenizer})
    return pair.model_copy(update={"target": target})


def _target_tokenizer(pair: ResolvedPair, fingerprint: str) -> ResolvedPair:
    tokenizer = pair.target.tokenizer.model_copy(update={"fingerprint": fingerprint})
    return pair.model_copy(update={"target": pair.target.model_copy(
        update={"tokenizer": tokenizer})})


def rules(pair: ResolvedPair) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in run(Context(pair)):
        found.setdefault(f.rule, []).append(f.message)
    return found


GATE: dict[str, tuple[Callable[[], ResolvedPair], Callable[[], ResolvedPair], str]] = {
    # rule: (failing fixture, passing fixture, words of the finding)
    "SP203 no intersection in the lock": (
        lambda: mapped(hetero(), None), lambda: mapped(hetero(), mapping()),
        "the lock has no vocabulary intersection"),
    "SP203 no unk and no eos": (
        lambda: mapped(hetero(), mapping(target_fallback=None)),
        lambda: mapped(hetero(), mapping()), "refuses to start"),
    "SP203 empty intersection": (
        lambda: mapped(hetero(), mapping(intersection=0)), lambda: mapped(hetero(), mapping()),
        "share no token"),
    "SP203 computed from other tokenizer files": (
        lambda: mapped(hetero(), mapping(draft_tokenizer="sha256:" + "c" * 64)),
        lambda: mapped(hetero(), mapping(draft_tokenizer="sha256:" + "d" * 64)),
        "computed from other draft tokenizer files"),
    "SP204 below the engine's warning": (
        lambda: mapped(hetero(), mapping(intersection=99)),
        lambda: mapped(hetero(), mapping(intersection=100, target_vocab=150, draft_vocab=120)),
        "very small vocabulary intersection (99 tokens"),
    "SP204 low coverage of the target": (
        lambda: mapped(hetero(), mapping(intersection=30000)),
        lambda: mapped(hetero(), mapping(intersection=80000, draft_vocab=100000)),
        "only 30000 of the target's 151936 tokens (19.7%)"),
    "SP204 eos has no draft counterpart": (
        lambda: mapped(hetero(), mapping(special_mapped={"target eos </s>": False})),
        lambda: mapped(hetero(), mapping()), "never proposes the end of a sequence"),
    "SP207 the mode on one tokenizer": (
        lambda: _same_tokenizers(mapped(hetero(), mapping())),
        lambda: _target_tokenizer(mapped(hetero(), mapping()), "sha256:" + "f" * 64),
        "the heterogeneous mode is not needed"),
    "SP206 hub tokenizers read at the default branch": (
        lambda: mapped(hetero(), mapping()), lambda: mapped(by_path(hetero()), mapping()),
        "from the default branch"),
}


@pytest.mark.parametrize("name", sorted(GATE))
def test_each_gate_rule_fails_and_passes(name: str) -> None:
    failing_pair, passing_pair, words = GATE[name]
    rule_id = name.split()[0]
    assert any(words in m for m in rules(failing_pair()).get(rule_id, [])), \
        rules(failing_pair())
    assert not any(words in m for m in rules(passing_pair()).get(rule_id, []))


def test_the_mode_replaces_the_shared_vocabulary_rules() -> None:
    # unequal sizes and different tokenizers are the point of the mode, not a finding
    found = rules(mapped(hetero(), mapping()))
    assert "SP201" not in found and "SP202" not in found
    plain = with_runbook(hetero(), speculation={"heterogeneous_vocab": False})
    assert "vocab sizes differ: target 151936, draft 32000" in rules(plain)["SP201"]


def test_the_note_states_the_engines_log_line() -> None:
    (note,) = rules(mapped(hetero(), mapping()))["SP205"]
    assert note == ("VocabMapping: target_vocab=151936, draft_vocab=32000, "
                    "intersection=24000 (75.0% of draft, 15.8% of target)")


def test_the_site_page_shows_the_intersection() -> None:
    from specpair.commands.site import vocabulary_section

    page = vocabulary_section(mapping(intersection_max=24010))
    assert "| intersection | 24,000-24,010 tokens: 75.0% of the draft's, 15.8% of the " \
           "target's |" in page
    assert "| unmapped draft proposals become | eos_token_id 151643 |" in page
    assert "refuses to start" in vocabulary_section(mapping(target_fallback=None))
