"""vLLM 0.34.0 (engines/vllm_0_34_0): the command, the two KV sizing modes of the budget, and
the rules 0.34.0 changed. What is checked here is specpair's own consistency (the launch
passes the bytes the budget shows, an estimate is never printed as exact); what 0.34.0's
code says of the same commands and pools is in tests/engine (its parser and config
validation, its KV planner), and what only a GPU can say is in
benchmarks/device/vllm_0_34_kv.py."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest

from specpair.analyse.launch import build_for
from specpair.engines.vllm_0_33_0.metrics import METRICS as METRICS_0_33_0
from specpair.engines.vllm_0_34_0 import budget as budget_0_34_0
from specpair.engines.vllm_0_34_0.metrics import METRICS
from specpair.generate.budget_files import csv_rows, markdown
from specpair.model.budget import Budget
from specpair.resolve.pair import ResolvedPair
from tests.support.geometries import dense
from tests.support.pairs import make_pair, with_runbook
from tests.support.paths import REPO
from tests.support.vocab import hetero

EAGLE3 = {"method": "EAGLE3", "num_speculative_tokens": 3}


def pair(deployment: dict[str, Any] | None = None, speculation: dict[str, Any] | None = None,
         draft_architecture: str = "LlamaForCausalLMEagle3", version: str = "0.34.0"
         ) -> ResolvedPair:
    draft = dense(1).model_copy(update={"architecture": draft_architecture})
    return make_pair(dense(36), draft, engine="vllm", version=version,
                     speculation=speculation or EAGLE3, deployment=deployment)


def argv(p: ResolvedPair, speculate: bool = True) -> list[str]:
    return [a for a in build_for(p, speculate=speculate).argv if isinstance(a, str)]


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def kv_line(b: Budget, speculative: bool) -> int:
    scenario = b.speculative if speculative else b.baseline
    assert scenario is not None
    value = next(x.value for x in scenario.lines if x.key == "kv_available")
    assert isinstance(value, int)
    return value


def test_pinned_launch_passes_the_bytes_the_budget_shows_for_each_server() -> None:
    p = pair()
    b = p.release.budget(p, p.gpu_spec)
    for speculate in (False, True):
        args = argv(p, speculate)
        assert flag(args, "--kv-cache-memory-bytes") == str(kv_line(b, speculate))
        assert "--gpu-memory-utilization" not in args
        assert flag(args, "--block-size") == "64"
    # the draft's weights come out of the pinned bytes of the speculative server only
    assert kv_line(b, False) - kv_line(b, True) == p.draft.weights.weight_bytes  # type: ignore[union-attr]
    # exact by construction: the capacity line of the pinned bytes, and a safety check
    assert b.speculative is not None and b.speculative.capacity_estimate is None
    check = next(x for x in b.speculative.lines if x.key == "non_kv_check")
    assert isinstance(check.value, int) and check.value > 0 and "assumptions" in check.rule


def test_a_declared_kv_size_is_passed_as_it_is_and_overcommitting_it_fails_the_check() -> None:
    p = pair(deployment={"kv_cache_memory_bytes": 10 << 30})
    assert flag(argv(p), "--kv-cache-memory-bytes") == str(10 << 30)
    too_big = pair(deployment={"kv_cache_memory_bytes": 79 << 30})
    b = too_big.release.budget(too_big, too_big.gpu_spec)
    assert b.speculative is not None and not b.speculative.fits
    assert "pinned KV bytes and the assumed non-KV memory exceed the GPU" in \
        b.speculative.verdict


def test_measured_mode_is_the_engine_default_and_its_capacity_is_an_estimate() -> None:
    p = pair(deployment={"kv_cache_sizing": "measured"})
    args = argv(p)
    assert "--kv-cache-memory-bytes" not in args
    assert flag(args, "--gpu-memory-utilization") == "1"  # CacheConfig's default with it on
    b = p.release.budget(p, p.gpu_spec)
    for scenario in (b.baseline, b.speculative):
        assert scenario is not None
        low, high = (int(x) for x in str(scenario.capacity_estimate).split("–"))
        assert low <= scenario.max_total_tokens <= high and low < high
        assert scenario.verdict.startswith("estimate")
        labels = {x.key: x.label for x in scenario.lines}
        assert "ESTIMATED" in labels["max_total_tokens"] and "ESTIMATED" in labels["num_blocks"]
    # no output prints the capacity without saying it is an estimate
    page = markdown(p, b)
    row = next(r for r in page.splitlines() if r.startswith("| token capacity"))
    assert row.count("estimate") == 2, row
    rows = [r for r in csv_rows(b).splitlines() if ",max_total_tokens," in r]
    assert rows and all("ESTIMATE" in r for r in rows)
    # the same pair pinned prints exact figures
    pinned = pair()
    pb = pinned.release.budget(pinned, pinned.gpu_spec)
    assert "estimate" not in next(r for r in markdown(pinned, pb).splitlines()
                                  if r.startswith("| token capacity"))


def test_measured_estimate_moves_with_the_measured_terms() -> None:
    """The engine's formula: a larger activation peak costs the peak and its 0.75 margin."""
    small, large = (pair(deployment={"kv_cache_sizing": "measured",
                                     "assumptions": {"activation_peak_bytes": peak}})
                    for peak in (2 << 30, 4 << 30))
    got = [kv_line(p.release.budget(p, p.gpu_spec), True) for p in (small, large)]
    # util 1.0: min(...) is headroom − margin, so KV = total − non-KV − margin − peak;
    # margin = max(1 GiB, 0.75 · peak): 1.5 GiB at a 2 GiB peak, 3 GiB at 4 GiB
    assert got[0] - got[1] == ((3 << 30) + (4 << 30)) - (3 * (1 << 29) + (2 << 30))


def test_measured_mode_with_a_declared_kv_size_is_refused_where_it_is_written() -> None:
    p = pair(deployment={"kv_cache_sizing": "measured", "kv_cache_memory_bytes": 1 << 30})
    errors = {e.field: e.message for e in build_for(p).errors}
    assert "turns the extensible KV cache off" in errors["deployment.kv_cache_memory_bytes"]


def test_heterogeneous_vocabulary_is_refused_by_name_with_the_release_that_has_it() -> None:
    p = hetero(version="0.34.0")
    errors = {e.field: e.message for e in build_for(p).errors}
    message = errors["speculation.heterogeneous_vocab"]
    assert "no heterogeneous-vocabulary mode" in message and "vllm 0.33.0" in message
    assert "VLLM_USE_V2_MODEL_RUNNER" not in build_for(p).env
    config = json.loads(flag(argv(p), "--speculative-config") or "{}")
    assert "use_heterogeneous_vocab" not in config
    # the gate's vocabulary rules that need the mode no longer apply: SP201 judges sizes
    from specpair.analyse.checks.gate import Context, run
    found = {f.rule for f in run(Context(p))}
    assert "SP201" in found and "SP205" not in found


def test_a_method_other_than_the_drafts_declared_speculator_is_refused() -> None:
    dflash = {"method": "DFLASH", "block_size": 16}
    right = pair(speculation=dflash, draft_architecture="DFlashDraftModel")
    assert not build_for(right).errors
    wrong = pair(speculation=EAGLE3, draft_architecture="DFlashDraftModel")
    errors = {e.field: e.message for e in build_for(wrong).errors}
    assert "requested method='eagle3', but the draft model is a 'dflash' checkpoint" in \
        errors["speculation.method"]
    # 0.33.0 has no such check
    assert not build_for(pair(speculation=EAGLE3, draft_architecture="DFlashDraftModel",
                              version="0.33.0")).errors


def test_dflash_caps_running_requests_at_the_draft_pass_size() -> None:
    dflash = {"method": "DFLASH", "block_size": 16}  # K = 15, 16 queries per request
    p = pair(speculation=dflash, draft_architecture="DFlashDraftModel",
             deployment={"max_running_requests": 1024})
    args = p.release.server_args(p, p.gpu_spec)
    assert args.max_num_batched_tokens == 8192  # H100's tier
    b = p.release.budget(p, p.gpu_spec)
    assert b.speculative is not None and b.speculative.max_running_requests == 8192 // 16
    assert b.baseline.max_running_requests == min(1024, b.baseline.max_total_tokens)
    assert flag(argv(p), "--max-num-seqs") == "1024"  # the engine applies the cap itself
    # recap (the planner's re-seat) keeps the cap
    again = with_runbook(p, deployment={"max_running_requests": 2048})
    recapped = p.release.recap(b, again, p.gpu_spec)  # type: ignore[misc]
    assert recapped is not None and recapped.speculative is not None
    assert recapped.speculative.max_running_requests == 512


def test_metrics_are_0_33_0s_under_this_release_label() -> None:
    assert METRICS.engine == "vllm 0.34.0"
    # every metric name the alerts, dashboards and bench read is the same; only the label
    # (and the two texts that name it) differ
    ours, theirs = asdict(METRICS), asdict(METRICS_0_33_0)
    differ = {key for key in ours if ours[key] != theirs[key]}
    assert differ == {"engine", "source", "per_request"}, differ  # texts with the title


@pytest.mark.parametrize("speculate", [False, True])
def test_pinned_bytes_of_the_launch_equal_the_budgets_closed_form(speculate: bool) -> None:
    p = pair(deployment={"parallel": {"tensor": 2}, "memory_fraction": 0.85,
                         "assumptions": {"cuda_graph_bytes": 3 << 30}})
    b = p.release.budget(p, p.gpu_spec)
    assert budget_0_34_0.pinned_kv_bytes(p, speculate) == kv_line(b, speculate)


def example(name: str) -> ResolvedPair:

    from specpair.commands.build import load_pairs

    (found,) = [p for p in load_pairs(REPO) if p.name == name]
    return found


def moved(pair: ResolvedPair, version: str) -> ResolvedPair:
    from specpair.analyse.plan.variants import variant

    return variant(pair, {("engine", "version"): version})


def test_upgrade_checklist_of_the_eagle3_example_names_each_change_and_the_budgets() -> None:
    from specpair.analyse.budget import compute
    from specpair.analyse.upgrade import REAPPLY, upgrade_items

    base = example("llama33-70b-eagle3-vllm")
    head = moved(base, "0.34.0")
    items = [i.removeprefix("Engine release vLLM 0.33.0 → vLLM 0.34.0: ")
             for i in upgrade_items(base, head)]
    pinned = budget_0_34_0.pinned_kv_bytes(head, True)
    for expected in ("flag --block-size 16 → 64", "flag --gpu-memory-utilization removed",
                     f"flag --kv-cache-memory-bytes added ({pinned})",
                     "15 flags and 4 config keys of the pair's command compared, 3 changed"):
        assert any(i.startswith(expected) for i in items), (expected, items)
    assert any("(KV cache sizing) is new in vLLM 0.34.0: pinned" in i for i in items)
    assert any(i.startswith("--block-size (KV block size (tokens)): default 16 → 64")
               for i in items)
    before, after = (compute(p).speculative for p in (base, head))
    assert before is not None and after is not None
    assert (f"budget: KV token capacity {before.max_total_tokens:,} → "
            f"{after.max_total_tokens:,}, full-context sequences "
            f"{before.sequences_at_context:,} → {after.sequences_at_context:,}") in \
        next(i for i in items if i.startswith("budget: "))
    assert any(i.startswith("Re-measure acceptance") for i in items) and REAPPLY in items
    assert any(i.startswith("Re-stage with the new release's image (vllm/vllm-openai:v0.34.0)")
               for i in items)
    assert not any("cannot move" in i for i in items)
    reviewed = [i for i in items if i.startswith("reviewed difference")]
    assert len(reviewed) == len(head.release.differences)
    # read the other way, a move back lists the same facts reversed
    back = upgrade_items(head, base)
    assert any("block size: 64 → 16" in i for i in back)


def test_upgrade_checklist_of_the_measured_mode_prints_an_estimate() -> None:
    from specpair.analyse.upgrade import upgrade_items

    base = example("llama33-70b-eagle3-vllm")
    head = moved(base, "0.34.0")
    head = with_runbook(head, deployment={"kv_cache_sizing": "measured",
                                          "memory_fraction": None})
    (line,) = [i for i in upgrade_items(base, head) if ": budget: " in i]
    after = line.split("KV token capacity ")[1].split(", full-context")[0]
    assert " → ≈ " in after and "(estimate, " in after, line


def test_the_tli_example_cannot_move_and_is_told_why_and_where_to_go() -> None:
    from specpair.analyse.upgrade import upgrade_items

    base = example("llama31-8b-qwen25-tli-vllm")
    items = upgrade_items(base, moved(base, "0.34.0"))
    assert "this pair cannot move" in items[0] and "no heterogeneous-vocabulary mode" in \
        items[0] and "vllm 0.33.0 still has it" in items[0], items[0]
    assert "pin engine.version: 0.33.0" in items[0]
    assert not any(i.startswith("Re-stage") for i in items)


def test_a_move_where_nothing_changes_says_what_was_compared() -> None:
    from specpair.analyse.upgrade import upgrade_items

    base = example("llama33-70b-eagle3-vllm")
    items = upgrade_items(base, moved(base, "0.32.0"))
    # "nothing changed" is told apart from "not looked at": what was compared is counted
    assert any("14 flags and 4 config keys of the pair's command compared, none changed" in i
               for i in items), items
    reviewed = [i for i in items if ": reviewed difference " in i]
    assert len(reviewed) == len(example("llama33-70b-eagle3-vllm-0-32-0").release.differences)


# what vLLM 0.34.0 logs at start-up (v1/core/kv_cache_utils.py:1169, one line per engine
# core; the worker lines of other ranks carry their rank)
ENGINE_LOG = """\
(EngineCore pid=1) INFO [default_loader.py:544] Loading weights took 41.20 seconds
(Worker_TP1 pid=2) INFO [kv_cache_utils.py:1169] GPU KV cache size: 9,999 tokens
(EngineCore pid=1) INFO [model_runner.py:1217] Graph capturing finished in 12 secs, took 0.61 GiB
(EngineCore pid=1) INFO [kv_cache_utils.py:1169] GPU KV cache size: 1,234,567 tokens, \
Maximum concurrency for 8,192 tokens per request: 150.70x
"""


def started(pair: ResolvedPair, engine_log: str) -> ResolvedPair:
    """The pair with a recorded start whose engine log was ingested."""
    from specpair.load.staging_log import StagingRecord, with_engine_log
    from tests.support.planted_records import staging_record

    data = staging_record(pair.name) | {"engine": pair.engine, "status": "ok", "fits": True,
                                        "failed_phase": None}
    data["phases"] = [{"phase": "engine_start", "seconds": 90.0, "status": "ok"}]
    record = with_engine_log(StagingRecord.model_validate(data), engine_log)
    return pair.model_copy(update={"staging_records": [record]})


def test_an_ingested_start_up_log_gives_the_measured_capacity_to_the_budget_and_card() -> None:
    from specpair.analyse.staging import plan
    from specpair.engines.log_timings import kv_capacity
    from specpair.generate.plan_files import measured_markdown, measured_of

    assert kv_capacity("vllm 0.34.0", ENGINE_LOG) == 1_234_567  # rank 0's line
    assert kv_capacity("vllm 0.33.0", ENGINE_LOG) is None  # its release names no line
    p = started(pair(deployment={"kv_cache_sizing": "measured"}), ENGINE_LOG)
    b = p.release.budget(p, p.gpu_spec)
    assert b.speculative is not None
    assert b.speculative.max_total_tokens == 1_234_567
    assert b.speculative.capacity_estimate is None  # measured: printed as the figure it is
    assert b.speculative.sequences_at_context == 1_234_567 // 8192
    assert "measured at the start recorded 2026-12-01T00:00:00Z" in b.speculative.verdict
    row = next(r for r in markdown(p, b).splitlines() if r.startswith("| token capacity"))
    assert "1,234,567" in row and row.count("estimate") == 1, row  # the baseline's only
    comparison = measured_of(p, plan(p))
    assert comparison is not None
    assert "1,234,567 tokens" in measured_markdown(comparison)  # staging.md and the card
    # without the log line the budget stays an estimate
    quiet = started(pair(deployment={"kv_cache_sizing": "measured"}),
                    ENGINE_LOG.replace("KV cache size", "KV cache"))
    qb = quiet.release.budget(quiet, quiet.gpu_spec)
    assert qb.speculative is not None and qb.speculative.capacity_estimate is not None


def test_a_fallbacks_baseline_start_in_the_same_log_is_not_the_pairs() -> None:
    """After a failed canary the script stops the pair and appends the baseline launch (the
    target alone, with more KV room) to the same log, after its mark: the budget keeps the
    capacity of the pair's own start, the weight load is the pair's."""
    from specpair.engines.log_timings import kv_capacity
    from specpair.load.staging_log import BASELINE_MARK

    baseline = ENGINE_LOG.replace("41.20", "30.00").replace("1,234,567", "2,000,000")
    log = ENGINE_LOG + BASELINE_MARK + "\n" + baseline
    assert kv_capacity("vllm 0.34.0", log) == 2_000_000  # the last report: the baseline's
    p = started(pair(deployment={"kv_cache_sizing": "measured"}), log)
    b = p.release.budget(p, p.gpu_spec)
    assert b.speculative is not None and b.speculative.max_total_tokens == 1_234_567
    (engine_start,) = p.staging_records[0].phases
    assert engine_start.detail["weight_load_s"] == 41.2


def test_impact_names_a_measured_capacity_an_estimate() -> None:
    from specpair.analyse.analysis import Analysis
    from specpair.commands.impact_checklist import _numbers

    measured = with_runbook(example("llama33-70b-eagle3-vllm-0-34-0"),
                            deployment={"kv_cache_sizing": "measured", "memory_fraction": None})
    tokens = _numbers(Analysis(measured))["tokens"]
    assert isinstance(tokens, str) and tokens.startswith("≈ ") and "(estimate)" in tokens
    assert isinstance(_numbers(Analysis(example("llama33-70b-eagle3-vllm-0-34-0")))["tokens"],
                      int)
