"""The example pairs, and pairs spread over two nodes, for the manifest and launch tests."""

from __future__ import annotations

from specpair.commands.build import load_pairs
from specpair.resolve.pair import ResolvedPair
from tests.support.geometries import DSPARK_5L, QWEN3_32B_LIKE, dense
from tests.support.pairs import make_pair
from tests.support.paths import REPO

PAIRS = {p.name: p for p in load_pairs(REPO)}


def sglang_two_nodes() -> ResolvedPair:
    return make_pair(QWEN3_32B_LIKE, DSPARK_5L, deployment={
        "gpus_per_node": 4, "nodes": 2, "parallel": {"tensor": 8}})


def vllm_two_nodes() -> ResolvedPair:
    return make_pair(dense(36), dense(5), engine="vllm", version="0.33.0",
                     speculation={"method": "DFLASH", "block_size": 16},
                     deployment={"gpus_per_node": 4, "nodes": 2, "parallel": {"tensor": 8}})
