"""The hybrid KV manager switch: the launch command carries it and the budget follows it.

The numbers themselves are checked against the engines' own code in
tests/engine/test_kv_oracle.py; here only what the switch must change.
"""

from __future__ import annotations

import json

import pytest

from specpair.analyse.budget import compute
from specpair.engines.sglang_0_5_23 import launch as sglang_launch
from specpair.engines.vllm_0_33_0 import launch as vllm_launch
from specpair.model.config_geometry import from_hf_config
from tests.support.pairs import make_pair
from tests.support.paths import FIXTURES

GPT_OSS = from_hf_config(json.loads(
    (FIXTURES / "configs" / "openai__gpt-oss-20b" / "config.json").read_text()))
NGRAM = {"method": "NGRAM", "num_speculative_tokens": 3}


@pytest.mark.parametrize(("engine", "version", "flag"), [
    ("sglang", "0.5.23", "--disable-hybrid-swa-memory"),
    ("vllm", "0.33.0", "--disable-hybrid-kv-cache-manager")])
def test_switch_reaches_the_command_and_the_budget(engine: str, version: str,
                                                    flag: str) -> None:
    launch = {"sglang": sglang_launch.build, "vllm": vllm_launch.build}[engine]
    pools = {}
    for hybrid in (True, False):
        pair = make_pair(GPT_OSS, None, engine=engine, version=version, speculation=NGRAM,
                         deployment={"gpu": "H200-141GB", "memory_fraction": 0.9,
                                     "parallel": {"tensor": 2}, "context_length": 131072,
                                     "hybrid_kv_pools": hybrid})
        assert (flag in launch(pair).argv) is not hybrid
        pools[hybrid] = compute(pair).baseline
    on, off = pools[True], pools[False]
    # with the hybrid manager on, sliding layers stop costing a full-length cache (vLLM's
    # capacity report shows it only for contexts well past its in-flight token bound)
    assert on.max_total_tokens > off.max_total_tokens
    if engine == "sglang":
        assert on.swa_tokens is not None and off.swa_tokens is None
        assert on.cell_swa > 0 and off.cell_swa == 0


def test_sliding_targets_of_other_architectures_keep_one_pool_in_sglang() -> None:
    # Gemma-3-style sliding layers are not in SGLang's hybrid-SWA list: counted in full
    gemma_like = GPT_OSS.model_copy(update={"architecture": "Gemma3ForCausalLM"})
    pair = make_pair(gemma_like, None, speculation=NGRAM,
                     deployment={"gpu": "H200-141GB", "memory_fraction": 0.9})
    budget = compute(pair)
    assert budget.baseline.swa_tokens is None
    # Gemma 3 is on the allowlist (the KV oracle checks google/gemma-3-1b-it's config)
    assert budget.unverified == []


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0", "0.34.0"])
def test_a_draft_beside_a_target_whose_every_layer_slides_is_refused_on_vllm(
        version: str) -> None:
    """A window on every layer (Mistral-7B-Instruct's config: no layer_types) is budgeted
    alone: the whole-corpus KV oracle holds it exact. With a draft model vLLM gives the
    draft's layers the target's window too (CacheConfig.sliding_window; the KV harness
    builds them so), which the port does not: refused by name, not budgeted as full."""
    from specpair.model.errors import SpecpairError
    from tests.support.geometries import dense

    mistral = from_hf_config(json.loads(
        (FIXTURES / "corpus" / "sgl-project__ome-testdata-mistral" / "config.json")
        .read_text()))
    assert mistral.sliding_window_layers == mistral.num_hidden_layers
    deployment = {"gpu": "H200-141GB", "memory_fraction": 0.9, "context_length": 8192}
    alone = make_pair(mistral, None, engine="vllm", version=version, speculation=NGRAM,
                      deployment=deployment)
    assert compute(alone).baseline.max_total_tokens > 0
    draft = dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle3",
                                        "hidden_size": mistral.hidden_size,
                                        "vocab_size": mistral.vocab_size})
    with_draft = make_pair(mistral, draft, engine="vllm", version=version,
                           speculation={"method": "EAGLE3", "num_speculative_tokens": 3},
                           deployment=deployment)
    with pytest.raises(SpecpairError, match="every layer slides"):
        compute(with_draft)
