"""specpair's KV pools against the engines' own sizing code, over the config corpus.

For every corpus pair × TP size × KV dtype, the command specpair generates is handed to
the engine's own code on the CPU (src/specpair/engines/harness/sglang_pools.py) with one
KV budget, and specpair's per-token cells, pool split and token capacity must equal what the engine
computes. Expected values come only from the engines; nothing here re-derives them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.engines import verified_layouts
from specpair.engines.sglang_0_5_23 import launch as sglang_launch
from specpair.model.config_geometry import NotModelled
from specpair.model.errors import SpecpairError
from tests.engine import releases
from tests.engine.corpus import (
    BUNDLED,
    CONFIGS,
    CORPUS,
    MTP,
    PAIRS,
    REFUSED,
    CorpusPair,
    bundled_geometry,
    corpus_targets,
    geometry,
    make_pair,
)
from tests.engine.kv_cases import (
    ARCHITECTURES,
    DRAFT_FOLDERS,
    SGLANG_SCRIPTS,
    _exact,
    run_engine,
    sglang_cases,
    vllm_cases,
)

# one KV budget per rank for every case: an odd number of bytes, so that no division
# comes out even by accident (SGLang holds it as GiB, `rest`, before the state pool)
# the corpus is large; a smaller one would mean configs went missing
MIN_CASES = 100


def assert_registry_verified(engine: str, exact: list[str]) -> None:
    """Every allowlisted architecture of `engine` verified by the pairs' configs
    (tests/fixtures/configs), and every built-in MTP layout (a BUNDLED pair's draft), has
    exact oracle cases; the outside corpus's other entries are checked by
    test_the_whole_corpus_is_exact_or_refused_by_name."""
    covered = set().union(*(ARCHITECTURES[name] for name in exact))
    # built-in MTP layouts are met only as the pairs' BUNDLED drafts
    from_pairs = {arch for arch, folders in verified_layouts.verified()[engine].items()
                  if arch.endswith(" MTP layers")
                  or any((CONFIGS / folder).is_dir() for folder in folders)}
    missing = sorted(from_pairs - covered)
    assert not missing, f"{engine}: allowlisted without an exact oracle case: {missing}"


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
    from tests.engine.support import parse

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


# the releases the outside corpus runs on (CI time): vllm 0.32.0's allowlist holds the
# pairs' configs alone
WHOLE_CORPUS = {
    "sglang 0.5.18": ("sglang_pools_0_5_18.py",
                      lambda p: sglang_cases(p, release="sglang 0.5.18"), "sglang 0.5.18"),
    "sglang 0.5.23": ("sglang_pools.py", sglang_cases, None),
    "vllm 0.32.0": ("vllm_kv_plan.py", lambda p: vllm_cases(p, release="vllm 0.32.0")[0],
                    "vllm 0.32.0"),
    "vllm 0.33.0": ("vllm_kv_plan.py", lambda p: vllm_cases(p)[0], "vllm 0.33.0"),
    "vllm 0.34.0": ("vllm_kv_plan.py", lambda p: vllm_cases(p, release="vllm 0.34.0")[0],
                    "vllm 0.34.0"),
}


def with_mtp(targets: list[CorpusPair], release: str) -> list[CorpusPair]:
    """Each target that carries MTP layers (as `release`'s draft mode reads its config)
    once more with them as its bundled draft: the built-in MTP draft mode."""
    name, version = release.split()
    found = []
    for corpus in targets:
        mtp = bundled_geometry(geometry(corpus.target, corpus.root), name, version)
        if mtp.num_hidden_layers:
            found.append(CorpusPair(f"{corpus.name}-mtp", corpus.target, BUNDLED, MTP,
                                    root=corpus.root))
    return found


def allowlist_key(corpus: CorpusPair, release: str) -> str:
    """The allowlist entry that decides whether specpair budgets the pair on `release`:
    its target's layout, or for a bundled draft its MTP layers' ("… MTP layers")."""
    target = geometry(corpus.target, corpus.root)
    if corpus.draft != BUNDLED:
        return verified_layouts.layout_architecture(target)
    name, version = release.split()
    return verified_layouts.layout_architecture(bundled_geometry(target, name, version))


@pytest.mark.parametrize("release", sorted(WHOLE_CORPUS))
def test_the_whole_corpus_is_exact_or_refused_by_name(release: str) -> None:
    """Every target config of the outside corpus, alone (NGRAM), and with its built-in MTP
    layers as the draft where it has them, × TP × KV dtype: where the allowlist says the
    target's architecture and the pair's layout are verified, every case is exact in that
    engine; every other pair is refused, by the layout key (at lock) or by its
    architecture."""
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
    mtp_pairs = with_mtp(runnable, release)
    assert len(mtp_pairs) >= 10, len(mtp_pairs)  # the corpus's MTP-carrying targets
    runnable += mtp_pairs
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
            by_calculator[corpus.name] = str(refusal).splitlines()[0][:160]
    verdicts = _exact(script, cases, env)
    allowed = verified_layouts.verified()[engine]
    # each pair by what decides it: (its target's folder, its allowlist entry)
    decided = {c.name: (c.target, allowlist_key(c, release)) for c in runnable}
    target_arch = {c.target: allowlist_key(c, release) for c in runnable if c.draft is None}
    per_pair: dict[tuple[str, str], list[str | None]] = {}
    for name, verdict in verdicts.items():
        per_pair.setdefault(decided[name.split()[0]], []).append(verdict)
    exact = {key for key, vs in per_pair.items() if all(v is None for v in vs)}
    for (folder, key), vs in per_pair.items():
        if key in allowed and target_arch[folder] in allowed and (folder, key) not in exact:
            failures.append((engine, folder, key, next(v for v in vs if v)))
    by_arch = {k for k in per_pair if k[1] not in allowed or target_arch[k[0]] not in allowed}
    for arch, folders in allowed.items():
        for folder in folders:
            # drafts' entries: tests/engine/test_draft_oracle.py
            if (CORPUS / folder).is_dir() and not (CONFIGS / folder).is_dir() \
                    and (folder, arch) not in exact and folder not in DRAFT_FOLDERS:
                failures.append((engine, folder, arch, "allowlisted, not exact"))
    report[engine] = {
        "cases": len(verdicts), "exact cases": sum(v is None for v in verdicts.values()),
        "pairs budgeted (verified, exact)": len(set(per_pair) - by_arch),
        "refused by architecture": len(by_arch) + len(by_calculator),
        "unverified but exact (allowlist candidates)": {
            key: sorted(f for f, k in by_arch & exact if k == key)
            for key in sorted({k for _, k in by_arch & exact})},
    }
    print(f"corpus: {len(targets)} target configs, {len(mtp_pairs)} with their MTP layers; "
          f"refused by layout key at lock: {len(by_key)} {sorted(set(by_key.values()))}")
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
