"""vLLM 0.34.0's measured KV sizing: every output that shows the capacity says it is an
estimate. The engine sizes its KV cache after warmup from free memory it measures then
(v1/worker/extensible_kv_cache.py), so no figure specpair prints for that mode is the
engine's; a bare number would read as exact. Walked over everything a user sees: the
generated files, the site's pages, and the planner's table at every row."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specpair.analyse.analysis import Analysis
from specpair.analyse.plan.search import plan
from specpair.commands import site
from specpair.commands.build import render
from specpair.generate.plan_report import markdown
from specpair.resolve.pair import ResolvedPair
from tests.support.examples import example
from tests.support.pairs import with_runbook
from tests.support.paths import REPO

LABEL = re.compile(r"estimat|≈", re.IGNORECASE)


@pytest.fixture(scope="module")
def measured() -> ResolvedPair:
    return with_runbook(example("llama33-70b-eagle3-vllm-0-34-0"),
                        deployment={"kv_cache_sizing": "measured", "memory_fraction": None})


def _figures(pair: ResolvedPair) -> set[int]:
    budget = Analysis(pair).budget
    return {s.max_total_tokens for s in (budget.baseline, budget.speculative) if s is not None}


def _spelled(n: int) -> list[str]:
    return [str(n), f"{n:,}"]


def _unlabelled_lines(text: str, figures: set[int]) -> Iterator[str]:
    for line in text.splitlines():
        for n in figures:
            for form in _spelled(n):
                if re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d,])", line) \
                        and not LABEL.search(line):
                    yield line


def _unlabelled_objects(node: Any, figures: set[int]) -> Iterator[dict[str, Any]]:
    """JSON objects holding a figure (as a number or in a string) with no string of their
    own that calls it an estimate (a label, a legend, a verdict)."""
    if isinstance(node, list):
        for item in node:
            yield from _unlabelled_objects(item, figures)
    elif isinstance(node, dict):
        values = list(node.values())
        holds = any(v in figures for v in values if isinstance(v, int)) or any(
            form in v for v in values if isinstance(v, str) for n in figures
            for form in _spelled(n))
        if holds and not any(LABEL.search(v) for v in values if isinstance(v, str)):
            yield node
        for v in values:
            yield from _unlabelled_objects(v, figures)


def _unlabelled(files: dict[Path, bytes], figures: set[int]) -> list[str]:
    found = []
    for path, content in files.items():
        if path.suffix == ".svg":
            continue  # charts of memory in bytes and of speed, not of capacity
        text = content.decode()
        if path.suffix == ".json":
            found += [f"{path}: {o}" for o in _unlabelled_objects(json.loads(text), figures)]
        else:
            found += [f"{path}: {x.strip()}" for x in _unlabelled_lines(text, figures)]
    return found


def test_generated_files_and_site_label_a_measured_capacity(measured: ResolvedPair) -> None:
    figures = _figures(measured)
    outputs = {**render(REPO, [measured]).files, **site.render([measured], {}).files}
    shown = [path for path, content in outputs.items() if path.suffix != ".svg"
             and any(f"{n:,}" in content.decode() for n in figures)]
    assert len(shown) >= 2  # budget.md and the pair's page at least: the walk is not empty
    assert _unlabelled(outputs, figures) == []


def test_a_pinned_capacity_is_printed_as_the_figure_it_is() -> None:
    """The label follows the mode: the same pair pinned prints bare figures."""
    pinned = example("llama33-70b-eagle3-vllm-0-34-0")
    outputs = render(REPO, [pinned]).files
    assert _unlabelled(outputs, _figures(pinned)) != []


def test_planner_rows_of_the_measured_mode_are_estimates(measured: ResolvedPair) -> None:
    p = plan(measured)
    assert p.rows and all(r.kv_tokens_estimate is not None for r in p.rows if r.budget_fits)
    table = markdown(p, top=len(p.rows))
    rows = [x for x in table.splitlines() if "fits:" in x]
    assert rows and all("≈" in x and "(estimate)" in x for x in rows)
    pinned = plan(example("llama33-70b-eagle3-vllm-0-34-0"))
    assert all(r.kv_tokens_estimate is None for r in pinned.rows)
    assert not any("≈" in x for x in markdown(pinned).splitlines() if "fits:" in x)


def test_a_capacity_limit_from_a_measured_pool_says_so(measured: ResolvedPair) -> None:
    from specpair.analyse.latency import capacity

    budget = Analysis(measured).budget
    assert budget.speculative is not None
    n, reason = capacity(budget.speculative, 100_000)  # context beyond the pool's share
    assert n >= 1 and "≈" in reason and "an estimate" in reason and "start-up" in reason
