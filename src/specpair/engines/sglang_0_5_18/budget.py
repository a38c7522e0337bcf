"""SGLang 0.5.18's KV budget: 0.5.23's start-up order and pool formulas, which 0.5.18's own
pool code computes to the token over the oracle corpus (tests/engine/test_kv_oracle.py),
with this release's defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specpair.engines.sglang_0_5_18.args import DEFAULTS
from specpair.engines.sglang_0_5_23 import budget as base
from specpair.facts.hardware import GPU
from specpair.model.budget import Budget

if TYPE_CHECKING:  # annotations only: resolve sits above the engine registry
    from specpair.resolve.pair import ResolvedPair


def budget(pair: ResolvedPair, gpu: GPU) -> Budget:
    return base.budget(pair, gpu, DEFAULTS)


def recap(computed: Budget, pair: ResolvedPair, gpu: GPU) -> Budget | None:
    return base.recap(computed, pair, gpu, DEFAULTS)
