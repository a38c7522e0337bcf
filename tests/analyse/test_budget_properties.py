"""Budget properties that must hold for any geometry, and the vLLM block-pool arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specpair.analyse.budget import compute
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry
from tests.support.geometries import DSPARK_5L, QWEN3_32B_LIKE, dense
from tests.support.pairs import make_pair


@settings(max_examples=60, deadline=None)
@given(small=st.integers(1, 12), extra=st.integers(1, 12), tp=st.sampled_from([1, 2, 4, 8]),
       method=st.sampled_from(["DSPARK", "DFLASH", "EAGLE3"]),
       engine=st.sampled_from(["sglang", "vllm"]))
def test_a_larger_draft_never_increases_capacity(small: int, extra: int, tp: int, method: str,
                                                 engine: str) -> None:
    spec = {"method": method, "block_size": 8} if method != "EAGLE3" else {
        "method": "EAGLE3", "num_speculative_tokens": 3}
    version = "0.5.23" if engine == "sglang" else "0.33.0"
    capacities = []
    for layers in (small, small + extra):
        pair = make_pair(dense(36), dense(layers), engine=engine, version=version,
                         speculation=spec, deployment={"parallel": {"tensor": tp}},
                         draft_bytes=layers * (200 << 20))
        result = compute(pair).speculative
        assert result is not None
        capacities.append(result.max_total_tokens)
    assert capacities[1] <= capacities[0]


@pytest.mark.parametrize("method", ["DSPARK", "DFLASH"])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_fp8_draft_kv_halves_the_block_drafter_cell(method: str, tp: int) -> None:
    cells = []
    for dtype in ("bf16", "fp8_e4m3"):
        pair = make_pair(QWEN3_32B_LIKE, DSPARK_5L, speculation={"method": method,
                                                                 "block_size": 8},
                         deployment={"parallel": {"tensor": tp}, "draft_kv_cache_dtype": dtype})
        result = compute(pair).speculative
        assert result is not None
        cells.append(result.cell_draft)
    assert cells[1] * 2 == cells[0]


def test_eagle_family_budget_ignores_the_draft_kv_dtype() -> None:
    # SGLang budgets EAGLE drafts by scaling the target cell (its dtype), not the draft's
    cells = set()
    for dtype in ("bf16", "fp8_e4m3"):
        pair = make_pair(dense(32), dense(1), speculation={"method": "EAGLE3",
                                                            "num_speculative_tokens": 3},
                         deployment={"draft_kv_cache_dtype": dtype})
        result = compute(pair).speculative
        assert result is not None
        cells.add(result.cell_draft)
    # cell_t at TP 1 = 8 · 256 · 32 · 2 = 131,072; scaled by 1 draft layer / 32 layers
    assert cells == {131_072 // 32}


@pytest.mark.parametrize(("tp", "message"), [
    (3, "32 attention heads do not split over 3 ranks"),
    (6, "8 KV heads neither split over nor replicate evenly onto 6 ranks"),
])
def test_tp_that_does_not_divide_the_heads_is_rejected(tp: int, message: str) -> None:
    pair = make_pair(dense(36), dense(5), deployment={"gpus_per_node": 8,
                                                      "parallel": {"tensor": tp}})
    with pytest.raises(SpecpairError) as info:
        compute(pair)
    assert any(message in p.message for p in info.value.problems)
    assert all(p.location.field == "deployment.parallel.tensor" for p in info.value.problems)


def test_kv_heads_are_replicated_when_fewer_than_ranks() -> None:
    # 8 KV heads on 16 ranks: each rank keeps one head (not half of one)
    pair = make_pair(dense(32, heads=64, hidden=8192), None,
                     speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     deployment={"gpus_per_node": 8, "nodes": 2, "parallel": {"tensor": 16}})
    result = compute(pair).speculative
    assert result is not None and result.cell_target == 1 * 256 * 32 * 2


def test_vllm_block_pool_matches_the_worked_example() -> None:
    # by hand from vllm 0.33.0's kv_cache_interface.py page sizes: TP 2, block 16, 40 GiB
    # of KV → 17,133 blocks = 274,128 tokens
    pair = make_pair(QWEN3_32B_LIKE, DSPARK_5L, engine="vllm", version="0.33.0",
                     speculation={"method": "STANDALONE", "num_speculative_tokens": 4},
                     deployment={"parallel": {"tensor": 2}, "kv_cache_memory_bytes": 40 << 30})
    budget = compute(pair)
    assert budget.speculative is not None
    lines = {line.key: line.value for line in budget.speculative.lines}
    assert lines["bytes_per_block"] == 2_506_752
    assert lines["num_blocks"] == 17_133
    assert budget.speculative.max_total_tokens == 274_128
    assert budget.baseline.max_total_tokens == 327_680
    assert (budget.speculative.cell_target, budget.speculative.cell_draft) == (131_072, 25_600)


def test_vllm_mla_page_is_not_split_by_tp() -> None:
    mla = Geometry(architecture="DeepseekV3ForCausalLM", dtype="bfloat16", hidden_size=7168,
                   vocab_size=129280, max_position_embeddings=163840, num_hidden_layers=61,
                   attention="mla", full_attention_layers=61, num_attention_heads=128,
                   num_key_value_heads=128, head_dim=192, v_head_dim=128, kv_lora_rank=512,
                   qk_rope_head_dim=64)
    pair = make_pair(mla, None, engine="vllm", version="0.33.0",
                     speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     deployment={"gpu": "H200-141GB", "parallel": {"tensor": 8}})
    # 1,152 B per token per layer in bf16 × 61 layers = 70,272 B (vllm 0.33.0's
    # mla_attention.py: one latent per rank, not split by TP)
    assert compute(pair).baseline.cell_target == 70_272


def test_weights_that_do_not_fit_are_reported() -> None:
    pair = make_pair(dense(36), dense(5), target_bytes=200 << 30)
    result = compute(pair).speculative
    assert result is not None and not result.fits
    # 200 GiB of weights on an 80 GB GPU: no memory fraction can help, so none is named
    assert "the weights do not fit" in result.verdict
    assert "raise it above" not in result.verdict
