"""MoE read from every config family's spelling, on real config.json files (issue 14).

Expected figures are the publishers' own: Mistral AI's Mixtral-8x7B announcement (46.7B
total parameters, 12.9B used per token) and OpenAI's gpt-oss model card (gpt-oss-20b:
20.9B total, 3.6B active, embeddings not counted as active).
"""

from __future__ import annotations

import json

import pytest

from specpair.analyse.budget import compute
from specpair.analyse.latency import model
from specpair.model.config_geometry import from_hf_config
from specpair.model.geometry import Geometry
from tests.support.geometries import dense
from tests.support.pairs import make_pair
from tests.support.paths import FIXTURES


def moe_config(folder: str) -> Geometry:
    return from_hf_config(json.loads(
        (FIXTURES / "moe_configs" / folder / "config.json").read_text()))


def test_mixtral_is_moe_from_num_local_experts_and_intermediate_size() -> None:
    g = moe_config("mistralai__Mixtral-8x7B-v0.1")
    assert g.moe is not None
    assert (g.moe.experts, g.moe.active_experts, g.moe.moe_layers) == (8, 2, 32)
    assert g.moe.expert_params == 3 * 4096 * 14336
    shared = 46.7e9 - g.moe.routed_params
    active = shared + g.moe.active_experts * g.moe.expert_params * g.moe.moe_layers
    assert active == pytest.approx(12.9e9, rel=0.01)


def test_gpt_oss_is_moe_from_experts_per_token() -> None:
    config = json.loads((FIXTURES / "moe_configs" / "openai__gpt-oss-20b" / "config.json")
                        .read_text())
    del config["num_experts_per_tok"]  # the gpt-oss spelling alone must be enough
    g = from_hf_config(config)
    assert g.moe is not None
    assert (g.moe.experts, g.moe.active_experts, g.moe.moe_layers) == (32, 4, 24)
    # fused gate/up [2·2880, 2880] and down [2880, 2880] per expert (biases are ~0.03%)
    assert g.moe.expert_params == 3 * 2880 * 2880
    shared = 20.9e9 - g.moe.routed_params
    embedding = 201088 * 2880
    active = shared + g.moe.active_experts * g.moe.expert_params * g.moe.moe_layers - embedding
    assert active == pytest.approx(3.6e9, rel=0.02)


def test_a_dense_config_stays_dense() -> None:
    g = from_hf_config(json.loads((FIXTURES / "configs" / "Qwen__Qwen3-8B" / "config.json")
                                  .read_text()))
    assert g.moe is None


def _pair(target: Geometry, total_params: int):  # type: ignore[no-untyped-def]
    pair = make_pair(target, dense(1), speculation={"method": "EAGLE3",
                                                    "num_speculative_tokens": 3},
                     deployment={"context_length": 4096, "concurrency": 1},
                     target_bytes=total_params * 2, draft_bytes=200 << 20)
    weights = pair.target.weights.model_copy(update={"params_by_dtype": {"BF16": total_params}})
    return pair.model_copy(update={"target": pair.target.model_copy(update={"weights": weights})})


def test_moe_verify_costs_more_than_a_dense_reading_of_the_same_config() -> None:
    g = moe_config("openai__gpt-oss-20b")
    assert g.moe is not None
    # served as a BF16 checkpoint (20.9B parameters × 2 bytes, as `_pair` declares it), whose
    # config carries no quantization_config: the experts are read at the checkpoint's bytes
    g = g.model_copy(update={"moe": g.moe.model_copy(update={"weight_format": None})})
    as_moe = _pair(g, 20_900_000_000)
    as_dense = _pair(g.model_copy(update={"moe": None}), 20_900_000_000)
    moe_tau = model(as_moe, compute(as_moe)).at_concurrency.break_even
    dense_tau = model(as_dense, compute(as_dense)).at_concurrency.break_even
    # at batch 1 a 4-token verify touches ~1 − (1 − 4/32)^4 ≈ 41% of the experts, a decode
    # step 12.5%: break-even rises well above the dense reading
    assert moe_tau > dense_tau * 1.3


def test_the_moe_assumption_is_printed_only_for_moe_models() -> None:
    from specpair.generate.plan_files import breakeven_markdown

    moe_pair = _pair(moe_config("mistralai__Mixtral-8x7B-v0.1"), 46_700_000_000)
    dense_pair = _pair(dense(32), 8_000_000_000)
    assert "MoE" in breakeven_markdown(moe_pair, model(moe_pair, compute(moe_pair)))
    assert "MoE" not in breakeven_markdown(dense_pair, model(dense_pair, compute(dense_pair)))
