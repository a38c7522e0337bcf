"""The engines as the oracle for the gate (nox -s engines).

Mutated variants of the example runbooks are put through the gate (validate, lock, check)
and through each engine's own start-up validation
(tests/engine/engine_startup.py: vLLM 0.33.0's and 0.32.0's
create_engine_config, SGLang 0.5.23's and 0.5.18's ServerArgs resolution and ModelConfig),
both reading the same real config.json files in checkpoint folders without weights. Every
variant an engine refuses must fail the gate: 0 false passes. The examples themselves must
pass both.

The example pairs whose published configs are in tests/fixtures/configs/ are used as
they are; the vLLM example (Llama-3.3-70B, whose config is not there) is varied on the
Llama-3.1-8B-Instruct target and SpecForge's Llama-3 EAGLE-3 draft config, same method,
engine and parallel layout.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from specpair.engines.schedule_model import ResolvedSchedule, ScheduledRange
from tests.engine import releases
from tests.engine.mutations import BASES, Outcome, Variant, evaluate, startup

Edit = Callable[[dict[str, Any]], None]


def dep(**values: Any) -> dict[str, Any]:
    return {"deployment": values}


def spec(**values: Any) -> dict[str, Any]:
    return {"speculation": values}


VARIANTS = [
    # --- context length against the target's positions
    Variant("ctx-131072", "qwen3-8b-dflash", dep(context_length=131072), gate_says="SP402",
            engine_says="is greater than the derived"),
    Variant("ctx-40961", "qwen3-8b-dflash", dep(context_length=40961), gate_says="SP402",
            engine_says="is greater than the derived"),
    Variant("ctx-jsonnet-slip", "qwen3-8b-dflash", dep(context_length=327681),
            gate_says="SP402", engine_says="is greater than the derived"),
    Variant("ctx-at-positions", "qwen3-8b-dflash", dep(context_length=40960)),
    Variant("ctx-positions-16k", "qwen3-8b-dflash", target_config={
        "max_position_embeddings": 16384}, gate_says="SP402",
        engine_says="is greater than the derived"),
    Variant("ctx-262144", "llama31-8b-eagle3", dep(context_length=262144), gate_says="SP402",
            engine_says="is greater than the derived"),
    Variant("ctx-131072-llama", "llama31-8b-eagle3", dep(context_length=131072)),
    Variant("ctx-200000-vllm", "llama-eagle3-vllm", dep(context_length=200000),
            gate_says="SP402", engine_says="is greater than the derived max_model_len"),
    Variant("ctx-4096-vllm", "llama-eagle3-vllm", dep(context_length=4096)),
    # --- tensor parallel against heads and KV heads
    Variant("tp-3", "qwen3-8b-dflash", dep(parallel={"tensor": 3}), gate_says="SP501"),
    Variant("tp-2", "qwen3-8b-dflash", dep(parallel={"tensor": 2})),
    Variant("tp-16-on-8-gpus", "qwen3-8b-dflash", dep(parallel={"tensor": 16}),
            gate_says="GPUs"),
    Variant("tp-3-llama", "llama31-8b-eagle3", dep(parallel={"tensor": 3}), gate_says="SP501"),
    Variant("tp-3-vllm", "llama-eagle3-vllm", dep(parallel={"tensor": 3}), gate_says="SP501",
            engine_says="must be divisible by tensor parallel size (3)"),
    Variant("tp-6-vllm", "llama-eagle3-vllm", dep(parallel={"tensor": 6}), gate_says="SP501",
            engine_says="must be divisible by tensor parallel size (6)"),
    Variant("tp-8-vllm", "llama-eagle3-vllm", dep(parallel={"tensor": 8})),
    Variant("kv-heads-6-vllm", "llama-eagle3-vllm", target_config={"num_key_value_heads": 6},
            gate_says="num_key_value_heads"),
    # --- draft TP (vLLM)
    Variant("draft-tp-2-vllm", "llama-eagle3-vllm", dep(parallel={"tensor": 4,
                                                                 "draft_tensor": 2}),
            gate_says="draft TP", engine_says="cannot be other value than 1 or target"),
    Variant("draft-tp-1-vllm", "llama-eagle3-vllm", dep(parallel={"tensor": 4,
                                                                 "draft_tensor": 1})),
    # --- vocabulary
    Variant("draft-vocab-128000", "qwen3-8b-dflash", draft_config={"vocab_size": 128000},
            gate_says="SP201"),
    Variant("draft-vocab-128000-eagle3", "llama31-8b-eagle3",
            draft_config={"vocab_size": 128000}, gate_says="SP201"),
    Variant("draft-vocab-size-200000", "llama31-8b-eagle3",
            draft_config={"draft_vocab_size": 200000}, gate_says="SP201"),
    Variant("draft-vocab-128000-vllm", "llama-eagle3-vllm",
            draft_config={"vocab_size": 128000}, gate_says="SP201"),
    Variant("mask-token-outside", "qwen3-8b-dflash",
            draft_config={"dflash_config": {"mask_token_id": 200000,
                                            "target_layer_ids": [1, 9, 17, 25, 33]}},
            gate_says="SP305"),
    # --- co-design: layers, hidden size, block size
    Variant("feature-layer-40", "qwen3-8b-dflash",
            draft_config={"dflash_config": {"mask_token_id": 151669,
                                            "target_layer_ids": [1, 9, 17, 25, 40]}},
            gate_says="SP301"),
    Variant("declared-layers-beyond", "qwen3-8b-dflash",
            {"codesign": {"feature_layers": [1, 9, 17, 25, 40]}}, gate_says="SP30"),
    Variant("draft-hidden-5120", "qwen3-8b-dflash", draft_config={"hidden_size": 5120},
            gate_says="SP304"),
    Variant("eagle3-hidden-5120", "llama31-8b-eagle3", draft_config={"hidden_size": 5120},
            gate_says="SP307"),
    Variant("eagle3-hidden-5120-vllm", "llama-eagle3-vllm",
            draft_config={"hidden_size": 5120}, gate_says="SP307"),
    Variant("block-8-vs-16", "qwen3-8b-dflash", {"speculation": {"block_size": 8},
                                                 "codesign": {"block_size": 8}},
            gate_says="SP303"),
    # --- tree shapes and spellings
    Variant("tree-64-of-2x2", "llama31-8b-eagle3", spec(num_steps=2, topk=2,
                                                        num_draft_tokens=64),
            gate_says="num_draft_tokens"),
    Variant("tree-7-of-2x2", "llama31-8b-eagle3", spec(num_steps=2, topk=2,
                                                       num_draft_tokens=7)),
    Variant("tree-1x8", "llama31-8b-eagle3", spec(num_steps=1, topk=8, num_draft_tokens=9)),
    Variant("sglang-spelling", "llama31-8b-eagle3", spec(num_steps=3, topk=1,
                                                         num_draft_tokens=4),
            gate_says="num_speculative_tokens"),
    Variant("chain-gamma-3", "llama31-8b-eagle3", spec(num_steps=None, topk=1,
                                                       num_draft_tokens=None,
                                                       num_speculative_tokens=3)),
    Variant("topk-2-on-dflash", "qwen3-8b-dflash", spec(topk=2), gate_says="topk"),
    Variant("tree-on-vllm", "llama-eagle3-vllm", spec(num_speculative_tokens=None,
                                                      num_steps=3, topk=2,
                                                      num_draft_tokens=6),
            gate_says="topk"),
    Variant("gamma-10-vllm", "llama-eagle3-vllm", spec(num_speculative_tokens=10)),
    # --- memory
    Variant("mem-0.05", "qwen3-8b-dflash", dep(memory_fraction=0.05), gate_says="SP601"),
    Variant("mem-0.1-llama", "llama31-8b-eagle3", dep(memory_fraction=0.1),
            gate_says="SP601"),
    Variant("mem-0.05-vllm", "llama-eagle3-vllm", dep(memory_fraction=0.05),
            gate_says="SP601"),
    Variant("mem-0.95", "qwen3-8b-dflash", dep(memory_fraction=0.95)),
    # --- KV dtypes and pages
    Variant("kv-fp16", "qwen3-8b-dflash", dep(kv_cache_dtype="fp16"), gate_says="SP901"),
    Variant("kv-fp8-e5m2", "qwen3-8b-dflash", dep(kv_cache_dtype="fp8_e5m2")),
    Variant("draft-kv-fp8", "qwen3-8b-dflash", dep(draft_kv_cache_dtype="fp8_e4m3")),
    Variant("kv-fp16-vllm", "llama-eagle3-vllm", dep(kv_cache_dtype="fp16"),
            gate_says='kv_cache_dtype="float16" is incompatible with dtype="bfloat16"',
            engine_says='kv_cache_dtype="float16" is incompatible with dtype="bfloat16"'),
    Variant("kv-bf16-vllm", "llama-eagle3-vllm", dep(kv_cache_dtype="bf16")),
    Variant("kv-fp8-vllm", "llama-eagle3-vllm", dep(kv_cache_dtype="fp8_e4m3")),
    Variant("page-64", "qwen3-8b-dflash", dep(page_size=64)),
    Variant("page-16-tree", "llama31-8b-eagle3", dep(page_size=16)),
    Variant("page-16-vllm", "llama-eagle3-vllm", dep(page_size=16)),
    # --- engine flags and combinations
    Variant("overlap-loading", "qwen3-8b-dflash", {"staging": {"mode": "engine-overlap"}},
            gate_says="SP801"),
    Variant("pipeline-2-dflash", "qwen3-8b-dflash", dep(parallel={"pipeline": 2}),
            gate_says="pp_size 1", engine_says="only supports pp_size == 1"),
    Variant("expert-2-on-tp-1", "qwen3-8b-dflash", dep(parallel={"expert": 2}),
            gate_says="expert"),
    Variant("eager", "qwen3-8b-dflash", dep(cuda_graphs=False)),
    Variant("eager-vllm", "llama-eagle3-vllm", dep(cuda_graphs=False)),
    Variant("quant-fp8", "qwen3-8b-dflash", {"target": {"quantization": "fp8"}}),
    Variant("quant-bogus", "qwen3-8b-dflash", {"target": {"quantization": "bogus"}},
            gate_says="--quantization has no 'bogus'",
            engine_says="argument --quantization: invalid choice: 'bogus'"),
    Variant("quant-bogus-vllm", "llama-eagle3-vllm", {"target": {"quantization": "bogus"}},
            gate_says="quantization 'bogus'", engine_says="Unknown quantization method: bogus"),
    Variant("max-running-1", "llama31-8b-eagle3", dep(max_running_requests=1)),
]

# --- speculation schedules (issue 32): what each engine runs is checked in
# test_the_engines_run_the_generated_schedules; a schedule the engine drops (vLLM with
# data parallelism > 1: a warning, then the static K) must fail the gate
CHAIN = {"num_steps": None, "topk": 1, "num_draft_tokens": None, "num_speculative_tokens": 3}
SCHEDULE_VARIANTS = [
    (Variant("schedule-pinned-vllm", "llama-eagle3-vllm", spec(schedule=[
        {"start": 1, "end": 4, "k": 3}, {"start": 5, "end": 8, "k": 1},
        {"start": 9, "end": 12, "k": 0}])), True),
    (Variant("schedule-dp2-vllm", "llama-eagle3-vllm", dep(parallel={"tensor": 2, "data": 2}),
             gate_says="data parallelism"), False),
    (Variant("schedule-dp2-vllm-0.32.0", "llama-eagle3-vllm-0.32.0",
             dep(parallel={"tensor": 2, "data": 2}), gate_says="data parallelism"), False),
    (Variant("schedule-derived-sglang", "llama31-8b-eagle3", spec(**CHAIN,
                                                                  schedule="derived")), True),
    (Variant("schedule-pinned-sglang", "llama31-8b-eagle3", spec(**CHAIN, schedule=[
        {"start": 1, "end": 8, "k": 3}, {"start": 9, "end": 32, "k": 1},
        {"start": 33, "end": 48, "k": 0}])), True),
]
VARIANTS += [v for v, _ in SCHEDULE_VARIANTS]


# Where vllm 0.32.0's verdict differs from 0.33.0's (engines/vllm_0_32_0/facts.py
# DIFFERENCES): 0.32.0 has no VllmConfig._reject_mismatched_float_kv_cache, so it starts
# with a float16 cache on a bfloat16 model and the gate only warns.
VLLM_0_32_0_VERDICTS: dict[str, dict[str, str]] = {
    "kv-fp16-vllm": {"gate_says": "", "engine_says": ""},
}
# every vLLM variant again on the 0.32.0 example, through 0.32.0's own start-up
VARIANTS += [Variant(**{**v.__dict__, "name": f"{v.name}@0.32.0",
                        "base": "llama-eagle3-vllm-0.32.0",
                        **VLLM_0_32_0_VERDICTS.get(v.name, {})})
             for v in VARIANTS if v.base == "llama-eagle3-vllm"]

# Where vllm 0.34.0's verdict differs from 0.33.0's (engines/vllm_0_34_0/facts.py
# DIFFERENCES): none of the vLLM variants is about a difference so far; 0.34.0's own are
# VLLM_0_34_0_VARIANTS.
VLLM_0_34_0_VERDICTS: dict[str, dict[str, str]] = {}
VLLM_0_34_0 = "llama-eagle3-vllm-0.34.0"
# every vLLM variant again on the 0.34.0 example, through 0.34.0's own config validation
VARIANTS += [Variant(**{**v.__dict__, "name": f"{v.name}@0.34.0", "base": VLLM_0_34_0,
                        **VLLM_0_34_0_VERDICTS.get(v.name, {})})
             for v in VARIANTS if v.base == "llama-eagle3-vllm"]
DFLASH_DRAFT = {"architectures": ["DFlashDraftModel"], "block_size": 16,
                "dflash_config": {"mask_token_id": 128002, "target_layer_ids": [1, 9, 17]}}
VLLM_0_34_0_VARIANTS = [
    # the configured method against the draft's declared speculator (speculator_config.py
    # :404-427): an EAGLE-3 run of a DFlash checkpoint is refused by both, in one sentence
    Variant("method-vs-declared-0.34.0", VLLM_0_34_0, draft_config=DFLASH_DRAFT,
            gate_says="requested method='eagle3', but the draft model is a 'dflash'",
            engine_says="requested method='eagle3', but the draft model"),
    # the engine's default sizing: no --kv-cache-memory-bytes, the extensible cache
    Variant("kv-measured-0.34.0", VLLM_0_34_0, dep(kv_cache_sizing="measured")),
    Variant("kv-declared-0.34.0", VLLM_0_34_0, dep(kv_cache_memory_bytes=8 << 30)),
    Variant("kv-measured-and-declared-0.34.0", VLLM_0_34_0,
            dep(kv_cache_sizing="measured", kv_cache_memory_bytes=8 << 30),
            gate_says="kv_cache_memory_bytes turns the extensible KV cache off"),
]
VARIANTS += VLLM_0_34_0_VARIANTS

# Where sglang 0.5.18's verdict differs from 0.5.23's (engines/sglang_0_5_18/facts.py
# DIFFERENCES): none of these variants is about a difference, so none so far.
SGLANG_0_5_18_VERDICTS: dict[str, dict[str, str]] = {}
SGLANG_BASES = ("qwen3-8b-dflash", "llama31-8b-eagle3")


def at_0_5_18(v: Variant) -> Variant:
    """The variant with the runbook pinned to sglang 0.5.18, checked by 0.5.18's own
    start-up (resolution while parsing, check_server_args, ModelConfig)."""
    runbook = copy.deepcopy(v.runbook)
    runbook["engine"] = {"version": "0.5.18"}
    return Variant(**{**v.__dict__, "name": f"{v.name}@0.5.18", "runbook": runbook,
                      **SGLANG_0_5_18_VERDICTS.get(v.name, {})})


# the SGLang examples and every SGLang variant again, on 0.5.18
VARIANTS += [at_0_5_18(Variant(f"example:{name}", name)) for name in SGLANG_BASES]
VARIANTS += [at_0_5_18(v) for v in VARIANTS
             if v.base in SGLANG_BASES and not v.name.startswith("example:")]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    examples = [Variant(f"example:{name}", name) for name in BASES]
    found = [evaluate(v, tmp_path_factory.mktemp(v.name.replace(":", "-")))
             for v in examples + VARIANTS]
    for engine in releases.FOLDERS:
        todo = [o for o in found if engine in o.cases]
        if not todo:
            continue
        verdicts = startup(engine, [o.cases[engine] for o in todo])
        for outcome, verdict in zip(todo, verdicts, strict=True):
            outcome.verdicts[engine] = verdict
    table = [f"{'variant':28} {'engine':14} {'engine says':60} gate"]
    for o in found:
        for engine, v in o.verdicts.items():
            error = " ".join(v["error"].split())
            said = "accepts" if v["ok"] else f"{v['stage']}: {error[:52]}"
            table.append(f"{o.variant.name:28} {engine:14} {said:60} "
                         f"{'FAILS' if o.gate_failed else 'passes'}")
    print("\n".join(table))
    for o in found:  # the engines' reasons beside the gate's, for every refusal
        for engine, v in o.verdicts.items():
            if not v["ok"]:
                print(f"\n{o.variant.name} ({engine}): {' '.join(v['error'].split())[:400]}"
                      f"\n  gate: {o.gate_text[:400]}")
    return found


def test_the_corpus_has_at_least_40_variants_seen_by_an_engine(
        outcomes: list[Outcome]) -> None:
    seen = [o for o in outcomes if not o.variant.name.startswith("example:") and o.verdicts]
    assert len(seen) >= 40, len(seen)
    # a variant without a launch is one specpair refuses before writing it
    assert all(o.gate_failed for o in outcomes if not o.verdicts)


def test_the_examples_pass_the_gate_and_the_engines(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        if o.variant.name.startswith("example:"):
            assert not o.gate_failed, (o.variant.name, o.gate_text)
            assert all(v["ok"] for v in o.verdicts.values()), (o.variant.name, o.verdicts)


def test_no_variant_an_engine_refuses_passes_the_gate(outcomes: list[Outcome]) -> None:
    rejected = [o for o in outcomes if any(not v["ok"] for v in o.verdicts.values())]
    false_passes = [(o.variant.name, o.verdicts) for o in rejected if not o.gate_failed]
    caught = [o for o in rejected if o.gate_failed]
    print(f"\n{len(outcomes) - len(BASES)} variants; {len(rejected)} refused by an engine; "
          f"{len(caught)} of those fail the gate; false passes: {len(false_passes)}")
    assert rejected, "the corpus must contain variants the engines refuse"
    assert false_passes == []


def test_the_gate_fails_for_the_reason_the_variant_is_about(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        if o.variant.gate_says:
            assert o.gate_failed and o.variant.gate_says in o.gate_text, (
                o.variant.name, o.gate_text)


def test_each_refusal_is_the_engines_and_the_gates_same_reason(
        outcomes: list[Outcome]) -> None:
    # every refusal is reviewed: the variant names the engine's words for it, and the
    # gate's words for the same reason (checked above)
    for o in outcomes:
        refusals = [" ".join(v["error"].split()) for v in o.verdicts.values() if not v["ok"]]
        if refusals:
            assert o.variant.engine_says and o.variant.gate_says, o.variant.name
            assert all(o.variant.engine_says in r for r in refusals), (o.variant.name,
                                                                       refusals)
        else:
            assert not o.variant.engine_says, (o.variant.name, "the engine accepts it now")


def _vllm_entries(argv: list[str]) -> list[list[int]]:
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    entries: list[list[int]] = config["num_speculative_tokens_per_batch_size"]
    return entries


def test_the_engines_run_the_generated_schedules(outcomes: list[Outcome]) -> None:
    """The schedule each engine runs after its own checks (engine_startup.py: vLLM's dense
    lookup, SGLang's adaptive tiers) is the one specpair generated; the vLLM examples
    (schedule: derived) included, and the SGLang variants again through 0.5.18's own
    start-up (its release reuses 0.5.23's schedule). A schedule the engine drops fails the
    gate."""
    by_name = {o.variant.name: o for o in outcomes}
    runs = {v.name: r for v, r in SCHEDULE_VARIANTS}
    runs.update({f"{v.name}@0.5.18": r for v, r in SCHEDULE_VARIANTS if v.base in SGLANG_BASES})
    runs.update({"example:llama-eagle3-vllm": True, "example:llama-eagle3-vllm-0.32.0": True,
                 f"example:{VLLM_0_34_0}": True, "schedule-pinned-vllm@0.34.0": True,
                 "schedule-dp2-vllm@0.34.0": False})
    for name, expected in runs.items():
        o = by_name[name]
        if not expected:
            assert o.gate_failed and "cannot run a speculation schedule" in o.gate_text, name
            assert all(v["ok"] and v["schedule"] is None for v in o.verdicts.values()), name
            continue
        ((release, verdict),) = o.verdicts.items()
        assert verdict["ok"], (name, verdict)
        argv = [str(a) for a in o.cases[release]["argv"]]
        if release in releases.VLLM:
            entries = _vllm_entries(argv)
            ours = ResolvedSchedule(ranges=[ScheduledRange(start=a, end=b, k=k, candidates=[k])
                                            for a, b, k in entries], source="generated")
            lookup = verdict["schedule"]
            assert lookup, (name, verdict)
            # the engine's K at every batch it can run is the K specpair means there
            assert lookup == [ours.k_at(b) for b in range(1, len(lookup) + 1)], name
            if name == "schedule-pinned-vllm":
                assert entries == [[1, 4, 3], [5, 8, 1], [9, 12, 0]]
        else:
            path = argv[argv.index("--speculative-adaptive-config") + 1]
            written = json.loads(o.cases[release]["files"][path])
            tiers = {k: sorted(v["candidate_steps"]) for k, v in written.items()
                     if k.isdigit()}
            got = verdict["schedule"]
            assert got is not None and got["tiers"] == tiers, (name, got, tiers)
            largest = max(max(v) for v in tiers.values())
            assert got["steps"] == largest and got["draft_tokens"] == largest + 1, got
            if name.startswith("schedule-pinned-sglang"):
                assert tiers == {"1": [3], "9": [1], "33": [0]}
