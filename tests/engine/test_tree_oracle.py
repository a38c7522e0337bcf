"""SGLang 0.5.23's own draft-tree selection as the oracle for `acceptance_tree.tree_tau`
(nox -s engines).

`tree_tau` is the expected accept length of the tree SGLang verifies for an EAGLE draft of
top-k > 1: the planner, the latency model and the fitted sibling acceptance ρ all rest on
which nodes that tree holds. Here the engine chooses them: tests/engine/sglang_tree.py runs
`select_top_k_tokens` and `organize_draft_results` as the draft worker does, with the
draft's candidate probabilities at each position given. Under greedy verification
(`verify_tree_greedy`) a node is accepted when the target's token at every position of its
path is the node's, and one parent's children are exclusive events, so the expected accept
length of the engine's tree is 1 + the sum, over its nodes whose ancestors it also holds,
of their paths' products of positional acceptances (Sequoia, Chen et al. 2024, section 3);
the draft's probabilities are the acceptances, as `tree_tau` takes them. That sum over the
engine's own nodes must equal `tree_tau` for every SGLang tree shape of the published
points and a grid of shapes where the node budget cuts the candidate pool.
"""

from __future__ import annotations

import math

import pytest

from specpair.analyse import acceptance_fits, acceptance_tree, calibration_data
from tests.engine import releases, workers

RELEASE = "sglang 0.5.23"
GRID = [(topk, steps, ndt) for topk in (2, 3, 4, 8) for steps in (2, 3, 5, 8)
        for ndt in (4, 8, 16, 32, 64) if ndt - 1 <= topk + (steps - 1) * topk * topk]
ACCEPTANCE = ((0.9, 1.0), (0.7, 0.8), (0.5, 0.6))  # (α, δ)


def _ranks(alpha: float, decay: float, topk: int, steps: int, rho: float) -> list[list[float]]:
    """c(position, rank), as `tree_tau` defines it."""
    out = []
    for j in range(steps):
        row = [alpha if j == 0 else decay * alpha]
        for _ in range(topk - 1):
            row.append(min(row[-1] * rho, 1.0 - sum(row)))
        out.append(row)
    return out


def _accept_length(nodes: list[list[int]], ranks: list[list[float]]) -> float:
    held = {tuple(n) for n in nodes}
    total = 1.0
    for node in held:
        if all(node[:d] in held for d in range(1, len(node))):
            total += math.prod(ranks[j][r] for j, r in enumerate(node))
    return total


def _published_shapes() -> set[tuple[int, int, int]]:
    return {(p.topk, p.num_steps, p.num_draft_tokens) for p in calibration_data.load().points
            if p.engine == "sglang" and acceptance_fits.tree_topk(p) > 1 and p.num_steps
            and p.num_draft_tokens}


def test_tree_tau_is_the_accept_length_of_the_tree_sglang_selects() -> None:
    rho = acceptance_fits.sibling_acceptance()
    published = _published_shapes()
    assert len(published) >= 4, published  # every SGLang tree the points measured
    runs = [(shape, alpha, decay) for shape in sorted(set(GRID) | published)
            for alpha, decay in ACCEPTANCE]
    cases = [{"topk": topk, "steps": steps, "num_draft_tokens": ndt,
              "ranks": _ranks(alpha, decay, topk, steps, rho)}
             for (topk, steps, ndt), alpha, decay in runs]
    env = {**releases.env(RELEASE), "TORCHDYNAMO_DISABLE": "1"}
    trees = workers.call("sglang_tree", "verified_trees", env, cases, timeout=600)
    assert len(trees) == len(cases) > 100
    branched = 0
    for ((topk, steps, ndt), alpha, decay), case, nodes in zip(runs, cases, trees,
                                                               strict=True):
        assert len(nodes) == ndt - 1, (case, nodes)  # the engine verifies the budget
        expected = _accept_length(nodes, case["ranks"])
        got = acceptance_tree.tree_tau(alpha, steps + 1, decay, topk, ndt, rho)
        assert got == pytest.approx(expected, rel=1e-6), (topk, steps, ndt, alpha, decay)
        # a tree, not a chain: a deeper node below a sibling rank
        branched += any(len(n) > 1 and any(r > 0 for r in n) for n in nodes)
    assert branched > len(cases) // 2, branched
