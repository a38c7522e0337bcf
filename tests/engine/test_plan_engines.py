"""The engines' verdict on `specpair plan`'s recommendations (nox -s engines).

Every recommended configuration, and every point of every front, of every example (on
its own GPU and over the common GPUs) is turned into the launch specpair generates and
handed to the engine's own argument parser; the recommendations of the pairs whose real
configs are in the corpus also go through the engine's start-up validation (the mutation
oracle's harness), and through the gate on the written runbook.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specpair.analyse.launch import EnvRef, build_for
from specpair.analyse.plan.options import Options, expand_gpus
from specpair.analyse.plan.results import Row
from specpair.analyse.plan.search import plan
from specpair.analyse.plan.variants import variant
from specpair.commands.build import load_pairs
from specpair.resolve.pair import ResolvedPair
from tests.engine import releases
from tests.engine.mutations import BASES, Variant, evaluate, startup
from tests.engine.support import REPO, parse


def _changes(row: Row) -> dict[tuple[str, ...], Any]:
    return {tuple(k.split(".")): v for k, v in row.changes.items()}


def _argv(pair: ResolvedPair, row: Row) -> list[str]:
    launch = build_for(variant(pair, _changes(row)), speculate=row.depth > 0)
    assert not launch.errors, [p.message for p in launch.errors]
    return [a.name if isinstance(a, EnvRef) else a for a in launch.argv]


def recommended() -> list[tuple[str, ResolvedPair, Row]]:
    out = []
    for pair in load_pairs(REPO):
        for gpus in ((), expand_gpus(["common"])):
            result = plan(pair, Options(gpus=gpus))
            rows = {r.key: r for r in result.rows if r.passes_check}
            keys = {f.key for f in result.front}
            keys |= {r.key for r in (result.best, result.recommended) if r is not None}
            for key in sorted(keys):
                out.append((f"{pair.name} {'common' if gpus else 'own'} {key}", pair,
                            rows[key]))
    return out


def test_every_recommendation_and_front_point_passes_the_engine_parser() -> None:
    cases = recommended()
    assert len(cases) >= 12
    by_release: dict[str, list[tuple[str, list[str]]]] = {}
    for name, pair, row in cases:
        by_release.setdefault(pair.engine, []).append((name, _argv(pair, row)))
    assert {r.split()[0] for r in by_release} == {"sglang", "vllm"}
    for release, items in by_release.items():  # each pair's own release's parser
        verdicts = parse(release.split()[0], [argv for _, argv in items], release)
        failures = [(name, v["error"]) for (name, _), v in zip(items, verdicts, strict=True)
                    if not v["ok"]]
        assert not failures, failures


def _nested(changes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in changes.items():
        node = out
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


def test_recommendations_pass_the_engines_start_up_validation_and_the_gate(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    examples = {p.name: p for p in load_pairs(REPO)}
    variants = []
    for base_name, base in BASES.items():
        example = examples[Path(base.example).parent.name]
        for gpus in ((), ("H100-80GB", "H200-141GB")):
            best = plan(example, Options(gpus=gpus)).recommended  # what --write applies
            assert best is not None
            if best.depth == 0:
                continue  # no runbook describes the target alone
            variants.append(Variant(f"plan:{base_name}:{len(gpus)}", base_name,
                                    _nested(best.changes)))
    assert variants
    outcomes = [evaluate(v, tmp_path_factory.mktemp(v.name.replace(":", "-")))
                for v in variants]
    assert not [o.gate_text for o in outcomes if o.gate_failed]
    for engine in releases.FOLDERS:  # each example's own release (0.32.0, 0.34.0 too)
        todo = [o for o in outcomes if engine in o.cases]
        if not todo:
            continue
        verdicts = startup(engine, [o.cases[engine] for o in todo])
        refused = [(o.variant.name, v["stage"], v["error"][:300])
                   for o, v in zip(todo, verdicts, strict=True) if not v["ok"]]
        assert not refused, refused
