"""SGLang 0.5.23 pool sizing, reproducing worked examples to the byte.

Expected numbers were derived by hand from the engine's code (sglang 0.5.23:
srt/arg_groups/memory_hook.py::handle_gpu_memory_settings, srt/mem_cache/
kv_cache_configurator.py, srt/model_executor/pool_configurator.py), not outputs of this
module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specpair.analyse.budget import compute
from specpair.commands.build import load_pairs
from specpair.engines.sglang_0_5_23.args import default_mem_fraction
from specpair.engines.sglang_0_5_23.kv_cells import exact_draft_cell, target_cell
from specpair.engines.sglang_0_5_23.pool_sizing import Inputs, size_pool
from specpair.engines.sglang_0_5_23.state_pool import state_plan
from specpair.load.runbooks import load_runbook
from specpair.model.budget import GiB
from tests.support.geometries import DSPARK_5L, LING, QWEN3_32B_LIKE
from tests.support.paths import REPO


def test_qwen3_32b_like_with_dspark_cells_at_tp2() -> None:
    cell_t, _ = target_cell(QWEN3_32B_LIKE, attn_tp=2, pp=1, dtype_bytes=2)
    cell_d, _ = exact_draft_cell(DSPARK_5L, draft_attn_tp=2, dtype_bytes=2)
    assert (cell_t, cell_d, cell_t + cell_d) == (131_072, 25_600, 156_672)
    fp8, _ = exact_draft_cell(DSPARK_5L, draft_attn_tp=2, dtype_bytes=1)
    assert fp8 == 12_800 and fp8 * 2 == cell_d  # an fp8 draft KV dtype halves the draft cell


@pytest.mark.parametrize(("gpu_mib", "max_running", "expected"), [
    (81_559, None, 0.828), (143_771, None, 0.902), (81_559, 48, 0.833), (143_771, 48, 0.905)])
def test_default_mem_fraction(gpu_mib: int, max_running: int | None, expected: float) -> None:
    mf = default_mem_fraction(gpu_mib, tp=2, pp=1, user_max_running=max_running, use_mla=False)
    assert mf.value == expected
    reserved = next(line.value for line in mf.lines if line.key == "reserved_mib")
    assert reserved == (14_032 if max_running is None else 13_616)


def _qwen_inputs(p_gib: float = 78.0, f: float = 0.828) -> Inputs:
    return Inputs(free_before_load=int(p_gib * GiB), target_weights=int(30.51 * GiB),
                  draft_weights=int(0.40 * GiB), other_allocations=int(0.6 * GiB),
                  mem_fraction=f, page_size=1, context_length=40_960, max_running_requests=None)


@pytest.mark.parametrize(("cell_d", "tokens"), [
    (25_600, 226_670),    # exact DSPARK draft cell
    (0, 270_942),         # no draft KV (same weights charged)
    (12_800, 246_837),    # fp8_e4m3 draft KV
    (10_240, 251_308),    # fallback: ceil(131072 · 69 / 64) − 131072
])
def test_qwen3_32b_like_token_capacity_on_h100(cell_d: int, tokens: int) -> None:
    scenario = size_pool("x", _qwen_inputs(), 131_072, cell_d, speculative=True)
    assert scenario.max_total_tokens == tokens
    assert scenario.max_running_requests == 48  # the speculative default, not the estimate


def test_qwen3_32b_like_on_h200() -> None:
    scenario = size_pool("x", _qwen_inputs(138.5, 0.902), 131_072, 25_600, speculative=True)
    assert scenario.max_total_tokens == 640_227


def test_without_speculation_requests_come_from_the_estimate() -> None:
    # resolve_max_num_reqs in the 0.5.23 source: clamp(int(226,670 / 40,960 · 512), 2048,
    # 4096) = 2,833. (An earlier hand calculation printed 2,790, which no token count of
    # that example gives; the source formula is what the engine runs.)
    scenario = size_pool("x", _qwen_inputs(), 131_072, 25_600, speculative=False)
    assert scenario.max_total_tokens == 226_670
    assert scenario.max_running_requests == 2_833


def _ling_runbook(**linear_state: object):  # type: ignore[no-untyped-def]
    rb = load_runbook(REPO / "runbooks" / "ling-3-flash-dspark" / "runbook.yaml").runbook
    dep = rb.deployment.model_copy(update={"linear_state": rb.deployment.linear_state.model_copy(
        update=linear_state)})
    return rb.model_copy(update={"deployment": dep})


def _ling_inputs() -> Inputs:
    # "Target weights = 63 GB = 58.67 GiB per rank": the notes computed with 63e9 bytes
    return Inputs(free_before_load=int(138.5 * GiB), target_weights=63_000_000_000,
                  draft_weights=int(0.65 * GiB), other_allocations=int(0.6 * GiB),
                  mem_fraction=0.85, page_size=1, context_length=32_768, max_running_requests=48)


def test_ling_cells_at_tp4() -> None:
    cell_t, _ = target_cell(LING, attn_tp=4, pp=1, dtype_bytes=2)
    cell_d, _ = exact_draft_cell(DSPARK_5L, draft_attn_tp=4, dtype_bytes=2)
    assert (cell_t, cell_d) == (8_064, 12_800)
    assert cell_d > cell_t  # the draft's KV costs more per token than the target's


def test_ling_state_pool_per_slot() -> None:
    rb = _ling_runbook(replay_spec=True, replay_cache_len=32)
    _, plan = state_plan(rb, LING, attn_tp=4, rest_gib=57.805, speculative=True, verify=9,
                         max_running=48)
    values = {line.key: line.value for line in plan.lines}
    assert values["state_per_slot"] == 18_995_200
    assert values["replay_ring_per_slot"] == 13_798_400
    assert plan.per_slot == 32_793_600
    assert plan.ratio == 5


@pytest.mark.parametrize(("linear_state", "cell_d", "slots", "tokens"), [
    ({"replay_spec": True, "replay_cache_len": 32}, 12_800, 895, 1_566_382),
    ({"replay_spec": True, "replay_cache_len": 32, "ssm_dtype": "bfloat16"}, 12_800, 1_243,
     1_566_458),
    ({"replay_spec": True, "replay_cache_len": 32, "full_memory_ratio": 0.3}, 12_800, 435,
     2_289_401),
    ({"replay_spec": True, "replay_cache_len": 32, "full_memory_ratio": 0.2}, 12_800, 314,
     2_479_586),
    ({"replay_spec": True, "replay_cache_len": 32, "max_cache_size": 240}, 12_800, 240,
     2_595_898),
    ({"replay_spec": True, "replay_cache_len": 32, "disable_radix_cache": True}, 12_800, 48,
     2_897_679),
    ({"replay_spec": False}, 12_800, 549, 2_072_461),
    ({"replay_spec": True, "replay_cache_len": 32}, 5_760, 895, 2_364_077),  # fallback cell
])
def test_ling_worked_example_and_variants(linear_state: dict[str, object], cell_d: int,
                                          slots: int, tokens: int) -> None:
    rb = _ling_runbook(**linear_state)
    scenario = size_pool("x", _ling_inputs(), 8_064, cell_d, rb, LING, attn_tp=4,
                         speculative=True, verify=9)
    assert scenario.state_slots == slots
    assert scenario.max_total_tokens == tokens
    assert scenario.max_running_requests == 48


def test_weights_that_leave_no_room_give_the_engines_advice() -> None:
    inputs = Inputs(free_before_load=int(78 * GiB), target_weights=int(70 * GiB),
                    draft_weights=int(1 * GiB), other_allocations=0, mem_fraction=0.85,
                    page_size=1, context_length=8192, max_running_requests=None)
    scenario = size_pool("x", inputs, 131_072, 0, speculative=True)
    assert not scenario.fits
    assert "raise it above 0.911" in scenario.verdict  # ceil((1 − 7/78)·1000)/1000


def test_example_budgets(tmp_path: Path) -> None:
    budgets = {p.name: compute(p) for p in load_pairs(REPO)}
    ling = budgets["ling-3-flash-dspark"]
    assert ling.speculative is not None
    assert (ling.speculative.cell_target, ling.speculative.cell_draft) == (8_064, 12_800)
    assert ling.draft_share_of_kv_pct == pytest.approx(61.35)
    assert ling.fallback is not None and ling.fallback.cell_draft == 5_760
    mtp = budgets["deepseek-v3-mtp"].speculative
    assert mtp is not None and (mtp.cell_target, mtp.cell_draft) == (70_272, 1_152)


@pytest.mark.parametrize("name", ["qwen3-8b-dflash", "ling-3-flash-dspark"])
def test_no_scenario_runs_more_requests_than_its_launch_allows(name: str) -> None:
    """With the limit left unset the launch still passes one (to the baseline server too):
    neither scenario of the budget may hold more running requests than that flag."""
    from specpair.analyse.launch import build_for
    from tests.support.pairs import with_runbook

    (pair,) = [p for p in load_pairs(REPO) if p.name == name]
    unset = with_runbook(pair, deployment={"max_running_requests": None})
    budget = compute(unset)
    for scenario, speculate in ((budget.baseline, False), (budget.speculative, True)):
        assert scenario is not None
        argv = [str(a) for a in build_for(unset, speculate=speculate).argv]
        limit = int(argv[argv.index("--max-running-requests") + 1])
        assert scenario.max_running_requests <= limit, (scenario.name, limit)
