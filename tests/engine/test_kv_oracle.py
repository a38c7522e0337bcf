"""specpair's KV pools against the engines' own sizing code, over the config corpus.

For every corpus pair × TP size × KV dtype, the command specpair generates is handed to
the engine's own code on the CPU (tests/engine/sglang_pools.py) with one KV budget, and
specpair's per-token cells, pool split and token capacity must equal what the engine
computes. Expected values come only from the engines; nothing here re-derives them.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from specpair.analyse.launch import EnvRef
from specpair.engines import registry as releases_registry
from specpair.engines import verified_layouts
from specpair.engines.sglang_0_5_23 import args as sglang_args
from specpair.engines.sglang_0_5_23 import budget as sglang_budget
from specpair.engines.sglang_0_5_23 import launch as sglang_launch
from specpair.model.config_geometry import NotModelled
from specpair.model.errors import SpecpairError
from tests.engine import releases, workers
from tests.engine.conftest import HERE
from tests.engine.corpus import (
    BUNDLED,
    CONFIGS,
    CORPUS,
    KV_DTYPES,
    PAIRS,
    REFUSED,
    TENSOR_PARALLEL,
    CorpusPair,
    corpus_targets,
    geometry,
    local_layers,
    make_pair,
)

# one KV budget per rank for every case: an odd number of bytes, so that no division
# comes out even by accident (SGLang holds it as GiB, `rest`, before the state pool)
# the corpus is large; a smaller one would mean configs went missing
MIN_CASES = 100
# case name → the layout architectures it checks (verified_layouts.layout_architecture)
ARCHITECTURES: dict[str, set[str]] = {}


def _record(name: str, pair: Any) -> None:
    models = [pair.target.geometry]
    if pair.draft is not None and pair.runbook.speculation.method.value != "NGRAM":
        models.append(pair.draft.geometry)
    ARCHITECTURES[name] = {verified_layouts.layout_architecture(g) for g in models}


def assert_registry_verified(engine: str, exact: list[str]) -> None:
    """Every allowlisted architecture of `engine` verified by the pairs' configs
    (tests/fixtures/configs) has exact oracle cases; the outside corpus's entries are
    checked by test_the_whole_corpus_is_exact_or_refused_by_name."""
    covered = set().union(*(ARCHITECTURES[name] for name in exact))
    from_pairs = {arch for arch, folders in verified_layouts.verified()[engine].items()
                  if any((CONFIGS / folder).is_dir() for folder in folders)}
    missing = sorted(from_pairs - covered)
    assert not missing, f"{engine}: allowlisted without an exact oracle case: {missing}"
KV_BUDGET = 61 * (1 << 30) + 123_457
REST_GIB = KV_BUDGET / (1 << 30)


def run_engine(script: str, cases: list[dict[str, Any]], env: dict[str, str] | None = None
               ) -> list[dict[str, Any]]:
    """The results of `script`'s own sizing (its `batch`) for `cases`, in a long-lived
    process for the script and `env` (tests/engine/workers.py)."""
    assert (HERE / script).is_file(), script
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
                cells = sglang_budget.pool_cells(pair, defaults)
                cell = cells.cell_target + cells.cell_draft
                rest, slots = REST_GIB, None
                if pair.target.geometry.linear_attention is not None:
                    rest, plan = sglang_budget.state_plan(
                        pair.runbook, pair.target.geometry, tp, REST_GIB, True,
                        sglang_args.verify_width(pair.runbook.speculation),
                        sglang_args.SPEC_DEFAULT_MAX_RUNNING_REQUESTS, defaults)
                    slots = plan.slots
                available = int(rest * (1 << 30))
                tokens, swa_tokens = sglang_budget.pool_tokens(available, cell, cells.swa, 1)
                ours = {"state_slots": slots, "available_bytes": available,
                        "cell": cell + (cells.swa.ratio * cells.swa.cell if cells.swa else 0),
                        "max_total_num_tokens": tokens, "swa_max_total_num_tokens": swa_tokens,
                        "configurator": "HybridSWAPoolConfigurator" if cells.swa
                        else "DefaultPoolConfigurator"}
                argv = argv_for_engine(launch.argv)
                _record(name, pair)
                cases.append((name, ours, {"argv": argv, "rest_gib": REST_GIB}))
    return cases


# release → (words of specpair's refusal, words of the engine's) for the corpus pairs a
# release's launch refuses; the engine must refuse each of them too
SGLANG_REFUSALS = {"sglang 0.5.18": ("reads markov_rank",
                                     "DSPARK requires markov_rank > 0 in the draft config")}


@pytest.mark.parametrize("release", releases.SGLANG)
def test_sglang_pools_equal_the_engines(release: str) -> None:
    refused: list[tuple[str, str, dict[str, Any]]] = []
    cases = sglang_cases(release=release, refused=refused)
    assert len(cases) >= MIN_CASES, len(cases)
    engine = run_engine(SGLANG_SCRIPTS[release],
                        [c for _, _, c in cases] + [c for _, _, c in refused],
                        releases.env(release))
    mismatches = []
    for (name, ours, _), theirs in zip(cases, engine, strict=False):
        if not theirs["ok"]:
            mismatches.append((name, theirs["error"]))
            continue
        got = {k: theirs[k] for k in ours}
        if got != ours:
            mismatches.append((name, {"specpair": ours, "engine": got}))
    ours_says, engine_says = SGLANG_REFUSALS.get(release, ("", ""))
    for (name, reason, _), theirs in zip(refused, engine[len(cases):], strict=True):
        if theirs["ok"] or engine_says not in theirs["error"] or ours_says not in reason:
            mismatches.append((name, {"specpair refuses": reason, "engine": theirs}))
    print(f"{release}: {len(cases) - len(mismatches)}/{len(cases)} cases exact; "
          f"{len(refused)} refused by both")
    assert not mismatches, json.dumps(mismatches, indent=1)[:20000]
    assert_registry_verified(release, [name for name, _, _ in cases])


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
                    name = f"{corpus.name} tp{tp} {kv}" + ("" if hybrid else " no-hybrid")
                    _record(name, pair)
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
                        "method": corpus.speculation["method"]}))
    return cases, refused


@pytest.mark.parametrize("release", releases.VLLM)
def test_vllm_block_pool_equals_the_engines(release: str) -> None:
    cases, refused = vllm_cases(release=release)
    assert len(cases) >= MIN_CASES, len(cases)
    engine = run_engine("vllm_kv_plan.py", [c for _, _, c in cases], releases.env(release))
    mismatches = []
    for (name, ours, _), theirs in zip(cases, engine, strict=True):
        if not theirs["ok"]:
            mismatches.append((name, theirs["error"], theirs["missing_module"]))
            continue
        got = {k: theirs[k] for k in ours}
        if got != ours:
            mismatches.append((name, {"specpair": ours, "engine": got}))
    print(f"{release}: {len(cases) - len(mismatches)}/{len(cases)} cases exact; "
          f"{len(refused)} refused as not modelled: {sorted({r.split()[0] for r in refused})}")
    assert not mismatches, json.dumps(mismatches, indent=1)[:20000]
    assert_registry_verified(release, [name for name, _, _ in cases])


@pytest.mark.parametrize(("folder", "key"), sorted(REFUSED.items()))
def test_unmodelled_layouts_are_refused_by_key(folder: str, key: str) -> None:
    with pytest.raises(NotModelled) as raised:
        geometry(folder)
    assert raised.value.key == key
    assert str(raised.value).startswith(f"not modelled: {key}")


def test_hybrid_switch_flags_parse_in_both_engines() -> None:
    from specpair.engines.vllm_0_33_0 import launch as vllm_launch
    from tests.engine.conftest import parse

    corpus = next(p for p in PAIRS if p.name == "gpt-oss-20b-ngram")
    for engine, version, build, flag in (
            ("sglang", "0.5.23", sglang_launch.build, "--disable-hybrid-swa-memory"),
            ("vllm", "0.33.0", vllm_launch.build, "--disable-hybrid-kv-cache-manager")):
        pair = make_pair(corpus, engine, version, 2, "auto", {"hybrid_kv_pools": False})
        assert pair is not None
        argv = [str(a) for a in build(pair).argv]
        assert flag in argv
        (verdict,) = parse(engine, [argv])
        assert verdict["ok"], verdict["error"]


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


# the releases the outside corpus runs on (CI time): vllm 0.32.0's allowlist holds the
# pairs' configs alone
WHOLE_CORPUS = {
    "sglang 0.5.23": ("sglang_pools.py", sglang_cases, None),
    "vllm 0.33.0": ("vllm_kv_plan.py", lambda p: vllm_cases(p)[0], "vllm 0.33.0"),
    "vllm 0.34.0": ("vllm_kv_plan.py", lambda p: vllm_cases(p, release="vllm 0.34.0")[0],
                    "vllm 0.34.0"),
}


@pytest.mark.parametrize("release", sorted(WHOLE_CORPUS))
def test_the_whole_corpus_is_exact_or_refused_by_name(release: str) -> None:
    """Every target config of the outside corpus, alone (NGRAM) × TP × KV dtype: where the
    allowlist says an architecture is verified, every case is exact in that engine; every
    other config is refused, by the layout key (at lock) or by its architecture."""
    targets = corpus_targets()
    assert len(targets) >= 80, len(targets)
    by_key: dict[str, str] = {}
    runnable: list[CorpusPair] = []
    for corpus in targets:
        try:
            geometry(corpus.target, corpus.root)
        except (NotModelled, ValueError, KeyError) as refusal:  # what `specpair lock` says
            by_key[corpus.target] = getattr(refusal, "key", None) or str(refusal)[:120]
            continue
        runnable.append(corpus)
    report: dict[str, dict[str, Any]] = {}
    failures = []
    script, build, sources = WHOLE_CORPUS[release]
    env = releases.env(sources) if sources is not None else None
    engine = release
    cases, by_calculator = [], {}
    for corpus in runnable:
        try:
            cases += build([corpus])
        except SpecpairError as refusal:  # a calculator's "not modelled"
            by_calculator[corpus.target] = str(refusal).splitlines()[0][:160]
    verdicts = _exact(script, cases, env)
    allowed = verified_layouts.verified()[engine]
    per_config: dict[str, list[str | None]] = {}
    folder_of = {c.name: c.target for c in runnable}
    for name, verdict in verdicts.items():
        per_config.setdefault(folder_of[name.split()[0]], []).append(verdict)
    exact = {c for c, vs in per_config.items() if all(v is None for v in vs)}
    for folder, vs in per_config.items():
        arch = verified_layouts.layout_architecture(geometry(folder, CORPUS))
        if arch in allowed and folder not in exact:
            failures.append((engine, folder, arch, next(v for v in vs if v)))
    by_arch = {c for c in per_config
               if verified_layouts.layout_architecture(geometry(c, CORPUS)) not in allowed}
    for arch, folders in allowed.items():
        for folder in folders:
            # drafts' entries: tests/engine/test_draft_oracle.py
            if (CORPUS / folder).is_dir() and not (CONFIGS / folder).is_dir() \
                    and folder not in exact and folder not in DRAFT_FOLDERS:
                failures.append((engine, folder, arch, "allowlisted, not exact"))
    report[engine] = {
        "cases": len(verdicts), "exact cases": sum(v is None for v in verdicts.values()),
        "configs budgeted (verified, exact)": len(set(per_config) - by_arch),
        "refused by architecture": len(by_arch | set(by_calculator)),
        "unverified but exact (allowlist candidates)": sorted(
            {verified_layouts.layout_architecture(geometry(c, CORPUS)) for c in by_arch & exact}),
    }
    print(f"corpus: {len(targets)} target configs; refused by layout key at lock: "
          f"{len(by_key)} {sorted(set(by_key.values()))}")
    print(json.dumps(report, indent=1))
    assert not failures, json.dumps(failures, indent=1)[:20000]


def test_gemma3_published_config_budgets_exactly_in_both_engines() -> None:
    """google/gemma-3-27b-it's config.json, unchanged (a verbatim vendored copy; see
    tests/test_gemma3_published.py for its lock): every TP × KV dtype × hybrid-switch case
    equals both engines' own pool code, and none is refused."""
    gemma3 = CorpusPair("gemma3-27b-published", "sgl-project__ome-testdata-gemma3", None,
                        {"method": "NGRAM", "num_speculative_tokens": 3}, root=CORPUS)
    assert verified_layouts.layout_architecture(geometry(gemma3.target, CORPUS)) == \
        "Gemma3ForConditionalGeneration"
    sglang = _exact("sglang_pools.py", sglang_cases([gemma3]))
    cases, refused = vllm_cases([gemma3])
    vllm = _exact("vllm_kv_plan.py", cases, releases.env("vllm 0.33.0"))
    assert not refused, refused
    for engine, verdicts in (("sglang 0.5.23", sglang), ("vllm 0.33.0", vllm)):
        # TP 1/2/4/8 × auto/fp8 × hybrid pools on and off (52 of its 62 layers slide)
        assert len(verdicts) == 16, (engine, sorted(verdicts))
        wrong = {name: v for name, v in verdicts.items() if v is not None}
        assert not wrong, (engine, wrong)
        print(f"{engine}: {len(verdicts)}/{len(verdicts)} cases exact")
