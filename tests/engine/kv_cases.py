"""The KV-pool oracle's cases: the corpus pairs' budgets beside what each engine release's own
pool sizing computes for them (run in its pinned environment)."""

from __future__ import annotations

import importlib
import json
from typing import Any

from specpair.analyse.budget import check_layouts
from specpair.analyse.launch import EnvRef
from specpair.engines import registry as releases_registry
from specpair.engines import verified_layouts
from specpair.engines.sglang_0_5_23 import args as sglang_args
from specpair.engines.sglang_0_5_23 import kv_cells as sglang_kv_cells
from specpair.engines.sglang_0_5_23 import launch as sglang_launch
from specpair.engines.sglang_0_5_23 import pool_sizing as sglang_pool_sizing
from specpair.engines.sglang_0_5_23 import state_pool as sglang_state_pool
from specpair.model.errors import SpecpairError
from tests.engine import releases, workers
from tests.engine.corpus import (
    BUNDLED,
    CORPUS,
    KV_DTYPES,
    PAIRS,
    TENSOR_PARALLEL,
    CorpusPair,
    local_layers,
    make_pair,
)
from tests.engine.support import HARNESS

# case name → the layout architectures it checks (verified_layouts.layout_architecture)
ARCHITECTURES: dict[str, set[str]] = {}


def _record(name: str, pair: Any) -> None:
    models = [pair.target.geometry]
    if pair.draft is not None and pair.runbook.speculation.method.value != "NGRAM":
        models.append(pair.draft.geometry)
    ARCHITECTURES[name] = {verified_layouts.layout_architecture(g) for g in models}


KV_BUDGET = 61 * (1 << 30) + 123_457


REST_GIB = KV_BUDGET / (1 << 30)


def run_engine(script: str, cases: list[dict[str, Any]], env: dict[str, str] | None = None
               ) -> list[dict[str, Any]]:
    """The results of `script`'s own sizing (its `batch`) for `cases`, in a long-lived
    process for the script and `env` (tests/engine/workers.py)."""
    assert (HARNESS / script).is_file(), script
    found: list[dict[str, Any]] = workers.call(script.removesuffix(".py"), "batch", env or {},
                                               cases, timeout=3000)
    assert len(found) == len(cases)
    return found


def argv_for_engine(argv: list[str | EnvRef]) -> list[str]:
    assert all(isinstance(a, str) for a in argv), argv
    return [str(a) for a in argv[2:]]  # drop `sglang serve` / `vllm serve`


SGLANG_SCRIPTS = {"sglang 0.5.23": "sglang_pools.py", "sglang 0.5.18": "sglang_pools_0_5_18.py"}


def sglang_cases(pairs: list[CorpusPair] | None = None, tps: tuple[int, ...] = TENSOR_PARALLEL,
                 kvs: tuple[str, ...] = KV_DTYPES, release: str = "sglang 0.5.23",
                 refused: list[tuple[str, str, dict[str, Any]]] | None = None
                 ) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """specpair's numbers and the engine's inputs, through `release`'s package: its
    defaults (args.DEFAULTS) in 0.5.23's pool code, which every SGLang package budgets
    with, and its own launch. A corpus pair the release's launch refuses goes to
    `refused` (name, specpair's reason, the engine's input) instead."""
    defaults = release_module(release, "args").DEFAULTS
    build = releases_registry.by_label(release).launch
    cases = []
    for corpus in PAIRS if pairs is None else pairs:
        for tp in tps:
            for kv, hybrid in [(kv, hybrid) for kv in kvs for hybrid in (True, False)]:
                pair = make_pair(corpus, "sglang", releases.version(release), tp, kv,
                                 {"hybrid_kv_pools": hybrid})
                if pair is None or (not hybrid and not local_layers(pair.target.geometry)):
                    continue  # the switch only matters with sliding or chunked layers
                if not _sized_alike(corpus, release, pair):
                    continue
                launch = build(pair, True)
                if "sglang" not in corpus.engines:
                    assert launch.errors, corpus.name
                    continue
                name = f"{corpus.name} tp{tp} {kv}" + ("" if hybrid else " no-hybrid")
                if launch.errors and refused is not None:  # the release's own refusal
                    refused.append((name, launch.errors[0].message, {
                        "argv": argv_for_engine(sglang_launch.build(pair, True, defaults).argv),
                        "rest_gib": REST_GIB}))
                    continue
                refuse_checkpoint(launch)
                cells = sglang_kv_cells.pool_cells(pair, defaults)
                cell = cells.cell_target + cells.cell_draft
                rest, slots = REST_GIB, None
                if pair.target.geometry.linear_attention is not None:
                    rest, plan = sglang_state_pool.state_plan(
                        pair.runbook, pair.target.geometry, tp, REST_GIB, True,
                        sglang_args.verify_width(pair.runbook.speculation),
                        sglang_args.SPEC_DEFAULT_MAX_RUNNING_REQUESTS, defaults)
                    slots = plan.slots
                available = int(rest * (1 << 30))
                tokens, swa_tokens = sglang_pool_sizing.pool_tokens(available, cell, cells.swa, 1)
                ours = {"state_slots": slots, "available_bytes": available,
                        "cell": cell + (cells.swa.ratio * cells.swa.cell if cells.swa else 0),
                        "max_total_num_tokens": tokens, "swa_max_total_num_tokens": swa_tokens,
                        "configurator": "HybridSWAPoolConfigurator" if cells.swa
                        else "DefaultPoolConfigurator"}
                argv = argv_for_engine(launch.argv)
                _record(name, pair)
                cases.append((name, ours, {"argv": argv, "rest_gib": REST_GIB}))
    return cases


def refuse_checkpoint(launch: Any) -> None:
    """A checkpoint the release's launch refuses outright (its quantization method,
    `engine_lists.refused_quantization`) is refused as specpair refuses it: no budget."""
    for finding in launch.errors:
        if finding.field in ("target", "draft"):
            raise SpecpairError.single("launch", finding.message, finding.hint)


def _sized_alike(corpus: CorpusPair, release: str, pair: Any) -> bool:
    """Whether the pair is one `release` sizes as specpair does; where it is not, the
    release's allowlist must refuse it (so no build budgets it)."""
    if corpus.releases is None or release in corpus.releases:
        return True
    try:
        check_layouts(pair)
    except SpecpairError:
        return False
    raise AssertionError(f"{corpus.name}: {release} sizes it otherwise, yet allowlists it")


def release_module(release: str, module: str) -> Any:
    """`args`, `budget` or `launch` of a release's package (engines/<name>_<version>/)."""
    name, version = release.split()
    return importlib.import_module(
        f"specpair.engines.{name}_{version.replace('.', '_')}.{module}")


def vllm_cases(pairs: list[CorpusPair] | None = None, tps: tuple[int, ...] = TENSOR_PARALLEL,
               kvs: tuple[str, ...] = KV_DTYPES, release: str = "vllm 0.33.0"
               ) -> tuple[list[tuple[str, dict[str, Any], dict[str, Any]]], list[str]]:
    """specpair's numbers and the engine's inputs, through `release`'s own package."""
    vllm_budget = release_module(release, "budget")
    vllm_args = release_module(release, "args")
    speculative_tokens = vllm_args.speculative_tokens
    cases, refused = [], []
    for corpus in PAIRS if pairs is None else pairs:
        for tp in tps:
            for kv in kvs:
                for hybrid in (True, False):
                    # the KV bytes pinned, as --kv-cache-memory-bytes passes them (vLLM
                    # 0.34.0's pinned mode; every release sizes the pool from them alone)
                    pair = make_pair(corpus, "vllm", releases.version(release), tp, kv,
                                     {"hybrid_kv_pools": hybrid,
                                      "kv_cache_memory_bytes": KV_BUDGET})
                    if pair is None or (not hybrid and not local_layers(pair.target.geometry)):
                        continue  # the switch only matters with sliding or chunked layers
                    if not _sized_alike(corpus, release, pair):
                        continue
                    name = f"{corpus.name} tp{tp} {kv}" + ("" if hybrid else " no-hybrid")
                    _record(name, pair)
                    refuse_checkpoint(releases_registry.by_label(release).launch(pair, True))
                    try:
                        plan, block, _, _ = vllm_budget.kv_plan(pair)
                    except SpecpairError as refusal:
                        assert "not modelled" in str(refusal), refusal
                        refused.append(name)
                        continue
                    dep = pair.runbook.deployment
                    in_flight = vllm_budget.IN_FLIGHT_BATCHES * \
                        vllm_args.default_max_num_batched_tokens(pair.gpu_spec)
                    blocks = KV_BUDGET // plan.bytes_per_block
                    per_request = plan.blocks_per_request(dep.context_length, block, in_flight)
                    # the block size the engine ends with (hybrids: aligned to the state)
                    ours = {"groups": [n for _, n, _, _ in plan.groups], "num_blocks": blocks,
                            "block_size": block,
                            "bytes_per_block": plan.bytes_per_block,
                            "capacity_tokens": int(blocks / per_request * dep.context_length),
                            "max_concurrency": blocks / per_request}
                    # the release's whole budget of that command says the same: its
                    # capacity is the engine's by construction, not a separate estimate
                    budgeted = vllm_budget.budget(pair, pair.gpu_spec)
                    scenario = budgeted.speculative or budgeted.baseline
                    assert (scenario.max_total_tokens, scenario.capacity_estimate) == (
                        ours["capacity_tokens"], None), name
                    draft = corpus.draft if corpus.draft in (None, BUNDLED) \
                        else str(corpus.path(corpus.draft))
                    if corpus.speculation["method"] == "NGRAM":
                        draft = None
                    cases.append((name, ours, {
                        "target": str(corpus.path(corpus.target)), "draft": draft, "tp": tp,
                        "draft_tp": dep.parallel.draft_tensor or tp,
                        # the command's --block-size, not specpair's aligned one
                        "block_size": dep.page_size or vllm_args.DEFAULT_BLOCK_SIZE,
                        "kv_cache_dtype": "fp8_e4m3" if kv == "fp8_e4m3" else "auto",
                        "max_model_len": dep.context_length, "available_bytes": KV_BUDGET,
                        "disable_hybrid_kv_cache_manager": not hybrid,
                        "max_in_flight_tokens": in_flight,
                        "num_speculative_tokens": speculative_tokens(pair),
                        "method": corpus.speculation["method"],
                        "engine_method": pair.release.profile.method_names.get(
                            pair.runbook.speculation.method)}))
    return cases, refused


def _exact(engine_script: str, cases: list[tuple[str, dict[str, Any], dict[str, Any]]],
           env: dict[str, str] | None = None) -> dict[str, str | None]:
    """case name → None when the engine computes what specpair does, else why not."""
    found = run_engine(engine_script, [c for _, _, c in cases], env) if cases else []
    verdicts: dict[str, str | None] = {}
    for (name, ours, _), theirs in zip(cases, found, strict=True):
        if not theirs["ok"]:
            verdicts[name] = f"engine error: {theirs['error'][:300]}"
        else:
            got = {k: theirs[k] for k in ours}
            verdicts[name] = None if got == ours else f"specpair {ours} engine {got}"
    return verdicts


DRAFT_FOLDERS = {e["folder"] for e in json.loads(
    (CORPUS / "SOURCES.json").read_text(encoding="utf-8")) if e["role"] == "draft"}
