"""A declared unverified KV layout is said in every output that carries a number from the
budget: the generated files of the pair, the site's pair page and the plan. A pair that
declares nothing says it nowhere, so the mark cannot be boilerplate."""

from __future__ import annotations

import json
from functools import cache

import pytest

from specpair.analyse.analysis import Analysis
from specpair.analyse.plan.options import Options
from specpair.analyse.plan.search import plan
from specpair.commands import site
from specpair.engines.verified_layouts import UNVERIFIED_MARK
from specpair.generate import PAIR_GENERATORS, plan_report
from specpair.resolve.pair import ResolvedPair
from tests.support.geometries import dense
from tests.support.pairs import make_pair

NGRAM = {"method": "NGRAM", "num_speculative_tokens": 3}
# outputs that hold no number of the budget, each with why
NOT_BUDGETED = {
    "launch-vllm.sh": "a translation to the other engine: not budgeted, not gated",
    "staging.json": "the cold-start plan: downloads and load times, no KV number",
    "staging.md": "the cold-start plan: downloads and load times, no KV number",
    "canary.py": "the canary's code, the same file for every pair",
    "canary-rules.yaml": "the canary's alerts: which launch serves and why, no number",
    "canary-monitoring.k8s.yaml": "the same alerts and their PodMonitor, no number",
}


def nas_pair(declared: bool) -> ResolvedPair:
    """A target of an architecture the allowlist does not verify (Nemotron-NAS's class),
    budgeted only because the runbook declares it."""
    target = dense(36).model_copy(update={"architecture": "DeciLMForCausalLM"})
    assumptions = {"unverified_layouts": ["DeciLMForCausalLM"]} if declared else {}
    return make_pair(target, None, speculation=NGRAM,
                     deployment={"assumptions": assumptions} if declared else None)


@cache
def outputs(declared: bool) -> dict[str, str]:
    """Every output of the pair, by name (computed once per module: the plan searches)."""
    pair = nas_pair(declared) if declared else make_pair(dense(36), None, speculation=NGRAM)
    analysis = Analysis(pair)
    files = {name: data.decode() for generate in PAIR_GENERATORS
             for name, data in generate(analysis).items()}
    page, _, _ = site.pair_page(analysis, None)
    files["site: pair page"] = page
    result = plan(pair, Options(gpus=("H100-80GB",), max_gpus=2))
    files["specpair plan (markdown)"] = plan_report.markdown(result)
    files["specpair plan (json)"] = plan_report.as_json(result)
    return files


def test_every_budgeted_output_says_unverified() -> None:
    files = outputs(declared=True)
    assert {"budget.md", "budget.csv", "launch-sglang.sh", "deployment.k8s.yaml",
            "breakeven.md", "card.md", "dashboard.grafana.json"} <= set(files)
    # JSON outputs carry the notes under `unverified` (checked below), text outputs the mark
    missing = [name for name, body in files.items() if name not in NOT_BUDGETED
               and not name.endswith("json)") and not name.endswith(".json")
               and UNVERIFIED_MARK not in body]
    assert not missing, f"no '{UNVERIFIED_MARK}' in: {missing}"
    # the mark names the architecture and what it means, wherever it is
    for name, body in files.items():
        if name not in NOT_BUDGETED:
            assert "DeciLMForCausalLM" in body, name
    wrongly = [name for name in NOT_BUDGETED if UNVERIFIED_MARK in files[name]]
    assert not wrongly, f"marked though not budgeted: {wrongly}"
    for name, body in files.items():
        if name.endswith((".json", "json)")) and name not in NOT_BUDGETED:
            data = json.loads(body)
            if name == "dashboard.grafana.json":  # Grafana's own schema: the description
                assert UNVERIFIED_MARK in data["description"], name
                continue
            assert any("DeciLMForCausalLM" in note for note in data["unverified"]), name


@pytest.mark.parametrize("name", ["budget.md", "launch-sglang.sh", "site: pair page"])
def test_the_mark_comes_before_the_first_budgeted_number(name: str) -> None:
    body = outputs(declared=True)[name]
    first_number = {"budget.md": "## Baseline", "launch-sglang.sh": "exec ",
                    "site: pair page": "## Overview"}[name]
    assert body.index(UNVERIFIED_MARK) < body.index(first_number), name


def test_a_verified_pair_is_marked_nowhere() -> None:
    marked = [name for name, body in outputs(declared=False).items()
              if UNVERIFIED_MARK in body or '"unverified": [\n' in body]
    assert not marked, marked
