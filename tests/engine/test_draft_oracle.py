"""The outside corpus's drafts through the KV oracle: each draft config paired with the
target it drafts for, × TP × KV dtype, in both engines' own pool code. Where specpair
budgets the pair, every case must equal the engine's; everything else must be refused by
name (the layout key at lock, the architecture by the allowlist, or the launch's own
rule). A draft whose target's config the corpus lacks is served with a stand-in target of
its hidden size and vocabulary (see `stand_in`), named in the report."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from specpair.analyse.budget import check_layouts
from specpair.analyse.launch import build_for
from specpair.engines import method_support, verified_layouts
from specpair.model.config_geometry import NotModelled
from specpair.model.errors import SpecpairError
from tests.engine.corpus import (
    CONFIGS,
    CORPUS,
    DFLASH,
    DSPARK,
    EAGLE3,
    CorpusPair,
    geometry,
    make_pair,
)
from tests.engine.kv_cases import DRAFT_FOLDERS, _exact, sglang_cases, vllm_cases

EAGLE = {"method": "EAGLE", "num_speculative_tokens": 3}
# SOURCES.json's draft_method → the runbook's speculation block; HASS trains an EAGLE-3
# head (speculators' Eagle3 format); Domino is a DFlash-format drafter
METHODS: dict[str, dict[str, Any]] = {
    "EAGLE-3": EAGLE3, "HASS": EAGLE3, "EAGLE": EAGLE, "DFlash": DFLASH,
    "Domino (DFlash variant)": DFLASH, "DSpark": DSPARK}
# the whole set of draft configs; fewer would mean the corpus lost some
MIN_DRAFTS = 55
def stand_in(draft: str, targets: list[str]) -> str | None:
    """A corpus target the draft can be served with when its own target's config is not
    in the corpus: the first (by folder) whose hidden size and vocabulary equal the
    draft's, as the engines need to run a draft on a target, and whose layout both
    engines' allowlists verify. A draft's KV cells come from its own config in both
    engines, so the target only adds its own (checked) pool."""
    g = geometry(draft, CORPUS, draft=True)
    for folder in sorted(targets):
        try:
            t = geometry(folder, CORPUS)
        except (NotModelled, ValueError, KeyError):
            continue
        verified = all(verified_layouts.layout_architecture(t) in entries
                       for entries in verified_layouts.verified().values())
        if verified and (t.hidden_size, t.vocab_size) == (g.hidden_size, g.vocab_size):
            return folder
    return None


def corpus_drafts() -> tuple[list[CorpusPair], dict[str, str], dict[str, str]]:
    """(pairs to run, draft folder → why it is not run, pair name → the stand-in target
    it is served with)."""
    entries = json.loads((CORPUS / "SOURCES.json").read_text(encoding="utf-8"))
    # a vendored copy of a published config answers for the model it `represents`
    targets = {(e.get("represents") or e["model_id"]).lower(): e["folder"]
               for e in entries if e["role"] == "target"}
    targets |= {e["model_id"].lower(): e["folder"] for e in entries if e["role"] == "target"}
    drafts = [e for e in entries if e["role"] == "draft"]
    assert len(drafts) >= MIN_DRAFTS, len(drafts)
    pairs, skipped, stand_ins = [], {}, {}
    for e in drafts:
        target = targets.get((e["draft_of"] or "").lower())
        method = METHODS.get(e.get("draft_method") or "")
        name = "draft-" + re.sub(r"[^a-z0-9]+", "-", e["folder"].lower()).strip("-")
        if method is None:
            skipped[e["folder"]] = f"method {e.get('draft_method')} has no runbook spelling"
            continue
        if target is None:
            try:
                target = stand_in(e["folder"], list(targets.values()))
            except (NotModelled, ValueError, KeyError) as refusal:
                skipped[e["folder"]] = "refused at lock: " + (
                    getattr(refusal, "key", None) or str(refusal)[:120])
                continue
            if target is None:
                skipped[e["folder"]] = (f"no config of its target {e['draft_of']} in the "
                                        "corpus, and no verified target of its hidden size "
                                        "and vocabulary")
                continue
            stand_ins[name] = f"{target} for {e['draft_of']}"
        pairs.append(CorpusPair(name, target, e["folder"], method, root=CORPUS))
    return pairs, skipped, stand_ins


def specpair_refusal(corpus: CorpusPair, engine: str) -> tuple[str, str] | None:
    """(which check, why) when specpair refuses the pair on `engine`, by name: the
    launch's own rules, the engine's method support, then the allowlist of verified
    layouts; None when it budgets it."""
    name, version = engine.split()
    pair = make_pair(corpus, name, version, 1, "auto")
    assert pair is not None, corpus.name  # TP 1 always splits
    launch = build_for(pair, engine)  # the release's own launch rules
    if launch.errors:
        return "launch", f"{launch.errors[0].field}: {launch.errors[0].message}"
    # the engine's model registry: its class cannot serve the method (the gate's SP308)
    cannot = method_support.refusal(engine, corpus.speculation["method"],
                                    pair.target.geometry.architecture)
    if cannot is not None:
        return "method", f"speculation.method: {cannot[0]}"
    try:
        check_layouts(pair)
    except SpecpairError as refusal:
        return "allowlist", str(refusal).splitlines()[0]
    return None


def test_corpus_drafts_are_exact_or_refused_by_name() -> None:
    pairs, skipped, stand_ins = corpus_drafts()
    refused_at_lock: dict[str, str] = {}
    runnable = []
    for corpus in pairs:
        try:
            geometry(corpus.target, CORPUS)
            geometry(corpus.draft or "", CORPUS, draft=True)
        except (NotModelled, ValueError, KeyError) as refusal:
            refused_at_lock[corpus.name] = getattr(refusal, "key", None) or str(refusal)[:120]
            continue
        runnable.append(corpus)
    report: dict[str, Any] = {}
    failures = []
    for engine, script, build, env in (
            ("sglang 0.5.23", "sglang_pools.py", sglang_cases, None),
            ("vllm 0.33.0", "vllm_kv_plan.py", lambda p: vllm_cases(p)[0],
             {"PYTHONPATH": os.environ["SPECPAIR_ENGINE_VLLM_0_33_0"]})):
        why_refused = {c.name: why for c in runnable
                       if (why := specpair_refusal(c, engine)) is not None}
        refused = {name: why for name, (_, why) in why_refused.items()}
        # pairs the launch refuses have no command to hand the engine; pairs the
        # allowlist refuses still run, to show what an entry would need
        cases = [case for c in runnable if why_refused.get(c.name, ("",))[0] != "launch"
                 for case in build([c])]
        if engine.startswith("sglang"):
            # SGLang sizes a block drafter's pools from its resolved speculative arguments
            # (sglang_pools.py: RESOLVED_SPECULATION)
            cases = [(n, ours, {**case, "resolve_speculative": True})
                     for n, ours, case in cases]
        verdicts = _exact(script, cases, env)
        by_pair: dict[str, list[str | None]] = {}
        for name, verdict in verdicts.items():
            by_pair.setdefault(name.split()[0], []).append(verdict)
        for name, vs in by_pair.items():
            bad = [v for v in vs if v is not None]
            if bad and name not in refused:
                failures.append((engine, name, len(bad), len(vs), bad[0]))
        report[engine] = {
            "pairs budgeted": len(set(by_pair) - set(refused)),
            "cases": len(verdicts), "exact cases": sum(v is None for v in verdicts.values()),
            "refused by specpair": refused,
            "refused but exact (allowlist candidates)": sorted(
                name for name, vs in by_pair.items()
                if name in refused and all(v is None for v in vs)),
            "exact pairs": sorted(name for name, vs in by_pair.items()
                                  if all(v is None for v in vs))}
    print(json.dumps({"drafts run": len(pairs), "not run": skipped, "stand-in targets":
                      stand_ins,
                      "refused at lock": refused_at_lock, **{
                          e: {k: v for k, v in r.items() if k != "exact pairs"}
                          for e, r in report.items()}}, indent=1))
    assert not failures, json.dumps(failures, indent=1)[:20000]
    for engine, found in report.items():  # every refusal names what it refuses
        for name, why in found["refused by specpair"].items():
            # the launch: the runbook field; the allowlist: the architecture
            assert re.match(r"[a-z_.]+: ", why) or re.search(r"\([A-Z][A-Za-z0-9_]+\)", why), (
                engine, name, why)
    # every allowlist entry verified by an outside-corpus draft has exact cases here
    folder_of = {c.name: c.draft for c in runnable}
    for engine, found in report.items():
        exact = {folder_of[name] for name in found["exact pairs"]}
        for architecture, folders in verified_layouts.verified()[engine].items():
            for folder in folders:
                # (configs of tests/fixtures/configs: the pairs of test_kv_oracle.py)
                if folder in DRAFT_FOLDERS and not (CONFIGS / folder).is_dir() \
                        and folder not in exact:
                    failures.append((engine, architecture, folder, "allowlisted, not exact"))
    assert not failures, json.dumps(failures, indent=1)
