"""Speculation schedules through the engines' own start-up (nox -s engines, issue 32).

Each generated schedule command goes through the release's start-up validation
(tests/engine/engine_startup.py), which also reports the schedule the engine *runs* after
its own checks: vLLM's dense batch → K lookup (`build_dynamic_sd_schedule_lookup`, the
scheduler's table), SGLang's adaptive tiers (`AdaptiveSpeculativeParams`). Both engines
drop a schedule they cannot run with a warning instead of refusing it; a dropped schedule
counts as a refusal here, and specpair's gate must refuse it too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.engines.schedule_model import ResolvedSchedule, ScheduledRange
from tests.engine.test_mutation_oracle import Outcome, Variant, dep, evaluate, spec, startup

CHAIN = {"num_steps": None, "topk": 1, "num_draft_tokens": None, "num_speculative_tokens": 3}
CASES = [
    # (variant, release, the engine runs the schedule)
    (Variant("vllm-derived", "llama-eagle3-vllm"), "vllm 0.33.0", True),
    (Variant("vllm-pinned", "llama-eagle3-vllm", spec(schedule=[
        {"start": 1, "end": 4, "k": 3}, {"start": 5, "end": 8, "k": 1},
        {"start": 9, "end": 12, "k": 0}])), "vllm 0.33.0", True),
    (Variant("vllm-dp2", "llama-eagle3-vllm", dep(parallel={"tensor": 2, "data": 2})),
     "vllm 0.33.0", False),
    (Variant("vllm-0.32-derived", "llama-eagle3-vllm-0.32.0"), "vllm 0.32.0", True),
    (Variant("vllm-0.32-dp2", "llama-eagle3-vllm-0.32.0",
             dep(parallel={"tensor": 2, "data": 2})), "vllm 0.32.0", False),
    (Variant("sglang-derived", "llama31-8b-eagle3", spec(**CHAIN, schedule="derived")),
     "sglang 0.5.23", True),
    (Variant("sglang-pinned", "llama31-8b-eagle3", spec(**CHAIN, schedule=[
        {"start": 1, "end": 8, "k": 3}, {"start": 9, "end": 32, "k": 1},
        {"start": 33, "end": 48, "k": 0}])), "sglang 0.5.23", True),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, tuple[Outcome, dict[str, Any] | None]]:
    found = {v.name: evaluate(v, tmp_path_factory.mktemp(v.name)) for v, _, _ in CASES}
    out: dict[str, tuple[Outcome, dict[str, Any] | None]] = {}
    for release in sorted({r for _, r, _ in CASES}):
        names = [v.name for v, r, _ in CASES if r == release and release in found[v.name].cases]
        verdicts = startup(release, [found[n].cases[release] for n in names])
        for name, verdict in zip(names, verdicts, strict=True):
            out[name] = (found[name], verdict)
    for v, _, _ in CASES:
        out.setdefault(v.name, (found[v.name], None))
    return out


def _vllm_entries(argv: list[str]) -> list[list[int]]:
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    entries: list[list[int]] = config["num_speculative_tokens_per_batch_size"]
    return entries


@pytest.mark.parametrize(("variant", "release", "runs"), CASES, ids=[v.name for v, _, _ in CASES])
def test_the_engine_runs_what_specpair_generates(
        results: dict[str, tuple[Outcome, dict[str, Any] | None]], variant: Variant,
        release: str, runs: bool) -> None:
    outcome, verdict = results[variant.name]
    if not runs:
        # the engine drops this schedule silently; specpair's gate refuses it by name
        assert outcome.gate_failed and "cannot run a speculation schedule" in \
            outcome.gate_text, outcome.gate_text
        if verdict is not None:
            assert verdict["ok"] and verdict["schedule"] is None, verdict
        return
    assert verdict is not None and verdict["ok"], (variant.name, verdict)
    case = outcome.cases[release]
    argv = [str(a) for a in case["argv"]]
    if release.startswith("vllm"):
        entries = _vllm_entries(argv)
        ours = ResolvedSchedule(ranges=[ScheduledRange(start=a, end=b, k=k, candidates=[k])
                                        for a, b, k in entries], source="generated")
        lookup = verdict["schedule"]
        assert lookup, verdict
        # the engine's K at every batch it can run is the K specpair means there
        assert lookup == [ours.k_at(b) for b in range(1, len(lookup) + 1)]
        if variant.runbook:
            assert entries == [[1, 4, 3], [5, 8, 1], [9, 12, 0]]
    else:
        path = argv[argv.index("--speculative-adaptive-config") + 1]
        written = json.loads(case["files"][path])  # as the harness wrote it before the case
        tiers = {k: sorted(v["candidate_steps"]) for k, v in written.items() if k.isdigit()}
        got = verdict["schedule"]
        assert got is not None and got["tiers"] == tiers, (got, tiers)
        largest = max(max(v) for v in tiers.values())
        assert got["steps"] == largest and got["draft_tokens"] == largest + 1, got
        if isinstance(variant.runbook["speculation"]["schedule"], list):
            assert tiers == {"1": [3], "9": [1], "33": [0]}
