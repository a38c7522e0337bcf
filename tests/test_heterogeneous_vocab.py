"""vLLM's heterogeneous-vocabulary mode (Token-Level Intersection): spec, command, rules.

The restrictions are vLLM 0.33.0's own (vllm/config/speculative.py `_verify_args`,
vllm/config/vllm.py V2-runner fallback, vllm/v1/spec_decode/draft_model.py); the real
parser and SpeculativeConfig field types are checked in tests/engine/test_parsers.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.launch import build_for
from specpair.resolve import ResolvedPair
from tests.pairs import make_pair
from tests.test_budget_properties import dense
from tests.test_launch import with_runbook


def hetero(speculation: dict[str, Any] | None = None, deployment: dict[str, Any] | None = None,
           engine: str = "vllm", version: str = "0.33.0") -> ResolvedPair:
    draft = dense(4).model_copy(update={"vocab_size": 32000})
    return make_pair(dense(36), draft, engine=engine, version=version, speculation={
        "method": "STANDALONE", "num_speculative_tokens": 4, "heterogeneous_vocab": True,
        **(speculation or {})}, deployment=deployment)


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


# each restriction: (field it is reported on, the change that breaks it, the engine's words)
RESTRICTIONS: dict[str, tuple[str, dict[str, dict[str, Any]], str]] = {
    "method draft_model only": (
        "speculation.heterogeneous_vocab", {"speculation": {"method": "EAGLE3"}},
        "only works with method='draft_model'"),
    "greedy draft sampling only": (
        "speculation.draft_sample_method",
        {"speculation": {"draft_sample_method": "probabilistic"}},
        "only supports greedy draft sampling"),
    "no local argmax reduction": (
        "speculation.local_argmax_reduction",
        {"speculation": {"local_argmax_reduction": True}},
        "not compatible with use_local_argmax_reduction"),
    "V1 runner: draft TP equals target TP": (
        "deployment.parallel.draft_tensor",
        {"deployment": {"parallel": {"tensor": 2, "draft_tensor": 1}}},
        "draft TP equal to the target's (2), not 1"),
}


@pytest.mark.parametrize("name", sorted(RESTRICTIONS))
def test_each_restriction_fails_its_fixture(name: str) -> None:
    field, change, words = RESTRICTIONS[name]
    pair = with_runbook(hetero(), **change)
    found = preflight(pair)
    assert field in found and words in found[field], found


PASSING: dict[str, dict[str, dict[str, Any]]] = {
    "method draft_model only": {"speculation": {"method": "STANDALONE"}},
    "greedy draft sampling only": {"speculation": {"draft_sample_method": "greedy"}},
    "no local argmax reduction": {"speculation": {"local_argmax_reduction": False}},
    "V1 runner: draft TP equals target TP": {
        "deployment": {"parallel": {"tensor": 2, "draft_tensor": 2}}},
}


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
