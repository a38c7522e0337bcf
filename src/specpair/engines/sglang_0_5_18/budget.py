"""SGLang 0.5.18's KV budget: 0.5.23's start-up order and pool formulas, which 0.5.18's own
pool code computes to the token over the oracle corpus (tests/engine/test_kv_oracle.py),
with this release's defaults."""

from __future__ import annotations

from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_18.args import DEFAULTS
from specpair.engines.sglang_0_5_23 import budget as base
from specpair.facts.hardware import GPU
from specpair.model.budget import Budget


def budget(pair: EngineInput, gpu: GPU) -> Budget:
    return base.budget(pair, gpu, DEFAULTS)


def recap(computed: Budget, pair: EngineInput, gpu: GPU) -> Budget | None:
    return base.recap(computed, pair, gpu, DEFAULTS)


reschedule = base.reschedule
