"""SGLang 0.5.23's own draft-tree selection as the oracle for `calibration.tree_tau`
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

from specpair import calibration
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


def _published_shapes() -> list[tuple[int, int, int]]:
    shapes = set()
    for p in calibration.load().points:
        if p.engine == "sglang" and calibration.tree_topk(p) > 1 and p.num_steps \
                and p.num_draft_tokens:
            shapes.add((p.topk, p.num_steps, p.num_draft_tokens))
    return sorted(shapes)


def test_the_published_points_hold_sglang_tree_shapes() -> None:
    """The shapes checked below include every SGLang tree the calibration points measured
    (so a point's τ is read through a tree the engine really builds)."""
    assert len(_published_shapes()) >= 4, _published_shapes()


def test_tree_tau_is_the_accept_length_of_the_tree_sglang_selects() -> None:
    rho = calibration.sibling_acceptance()
    shapes = sorted(set(GRID) | set(_published_shapes()))
    cases = [{"topk": topk, "steps": steps, "num_draft_tokens": ndt,
              "ranks": _ranks(alpha, decay, topk, steps, rho)}
             for topk, steps, ndt in shapes for alpha, decay in ACCEPTANCE]
    env = {**releases.env(RELEASE), "TORCHDYNAMO_DISABLE": "1"}
    trees = workers.call("sglang_tree", "verified_trees", env, cases, timeout=600)
    assert len(trees) == len(cases)
    checked = 0
    for case, nodes in zip(cases, trees, strict=True):
        topk, steps, ndt = case["topk"], case["steps"], case["num_draft_tokens"]
        assert len(nodes) == ndt - 1, (case, nodes)  # the engine verifies the budget
        alpha, decay = case["ranks"][0][0], (case["ranks"][1][0] / case["ranks"][0][0]
                                             if steps > 1 else 1.0)
        expected = _accept_length(nodes, case["ranks"])
        got = calibration.tree_tau(alpha, steps + 1, decay, topk, ndt, rho)
        assert got == pytest.approx(expected, rel=1e-6), (topk, steps, ndt, alpha, decay)
        checked += 1
    assert checked == len(cases) > 100


def test_the_oracle_tells_a_tree_that_is_not_the_engines() -> None:
    """The check can fail: taking the budget's nodes breadth-first (the first positions'
    candidates before any deeper one, a fixed-topology tree) instead of the engine's
    score order gives another accept length on a deep, narrow budget."""
    rho = calibration.sibling_acceptance()
    ranks = _ranks(0.9, 1.0, 2, 5, rho)
    breadth_first = [[0], [1], [0, 0], [0, 1], [1, 0], [1, 1]]
    engine = calibration.tree_tau(0.9, 6, 1.0, 2, 7, rho)
    assert _accept_length(breadth_first, ranks) < engine - 0.1
