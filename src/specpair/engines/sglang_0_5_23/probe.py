"""The question `specpair verify` puts to SGLang's own pool sizing for a pair: the
release's parser reads the pair's command (its model paths the local config folders),
its `KVCacheConfigurator` takes a hybrid's state pool first and its pool configurator
sizes the token pools from the same rest F − P·(1 − f) the budget found
(harness/sglang_pools.py; 0.5.18's steps in harness/sglang_pools_0_5_18.py).

The rest itself comes from the GPU's free memory at start-up, which no CPU can measure:
the engine confirms what its code makes of that rest, and the budget's assumptions about
the rest stay the budget's (its assumption lines)."""

from __future__ import annotations

from collections.abc import Callable

from specpair.engines.kv_probe import KvProbe
from specpair.engines.launch_model import Launch
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23 import launch
from specpair.engines.sglang_0_5_23.args import DEFAULTS, Defaults
from specpair.engines.sglang_0_5_23.kv_cells import pool_cells
from specpair.model.budget import Budget
from specpair.model.common import Method
from specpair.model.errors import SpecpairError

GiB = 1 << 30

LABELS = {
    "configurator": "pool configurator",
    "cell": "bytes per token (target + draft, + ratio × SWA cell)",
    "state_slots": "linear-attention state slots",
    "available_bytes": "bytes for the token pools",
    "max_total_num_tokens": "token capacity",
    "swa_max_total_num_tokens": "SWA pool tokens",
}


def kv_probe(pair: EngineInput, budget: Budget, defaults: Defaults = DEFAULTS,
             script: str = "sglang_pools.py",
             build: Callable[[EngineInput, bool], Launch] | None = None) -> KvProbe:
    """`pair`'s command (`build`: the release's launch, 0.5.23's by default) and the
    budget's rest, and what the budget made of them."""
    scenario = budget.speculative or budget.baseline
    rest = next((x.value for x in scenario.lines if x.key == "rest"), None)
    if not isinstance(rest, int) or rest <= 0:
        raise SpecpairError.single(pair.source_file, "nothing is left for the KV pools "
                                   "(the budget's rest is not positive): there is nothing "
                                   "for the engine to size", "make the budget fit first "
                                   "(`specpair budget`)")
    built = build(pair, True) if build is not None else launch.build(pair, True, defaults)
    argv = [a for a in built.argv[2:] if isinstance(a, str)]
    if len(argv) != len(built.argv) - 2:
        raise SpecpairError.single(pair.source_file, "a multi-node command: each node "
                                   "supplies arguments of its own", "verify the one-node "
                                   "deployment of the pair")
    cells = pool_cells(pair, defaults)
    cell = scenario.cell_total + (cells.swa.ratio * cells.swa.cell if cells.swa else 0)
    expected = {
        "configurator": "HybridSWAPoolConfigurator" if cells.swa else "DefaultPoolConfigurator",
        "cell": cell, "state_slots": scenario.state_slots,
        "available_bytes": scenario.kv_budget_bytes,
        "max_total_num_tokens": scenario.max_total_tokens,
        "swa_max_total_num_tokens": scenario.swa_tokens,
    }
    speculates = pair.runbook.speculation.method is not Method.NGRAM and pair.draft is not None
    return KvProbe(
        release=defaults.engine, script=script, env=dict(built.env), expected=expected,
        labels=LABELS,
        # the engine resolves its speculative arguments (a block drafter's tokens among
        # them) before it sizes the pools (harness/sglang_pools.py RESOLVED_SPECULATION)
        case={"argv": argv, "rest_gib": rest / GiB, "resolve_speculative": speculates,
              # what the command reads (a schedule's adaptive tiers): the parser reads it
              **({"files": dict(sorted(built.files.items()))} if built.files else {})},
        notes=["the rest F − P·(1 − f) is the budget's: the engine measures the GPU's free "
               "memory at start-up"])
