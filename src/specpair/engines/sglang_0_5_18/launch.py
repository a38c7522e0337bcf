"""`sglang serve` for SGLang 0.5.18: 0.5.23's command (0.5.18's parser accepts every flag
it writes, tests/engine/test_parsers.py), with the start-up refusals only 0.5.18 has."""

from __future__ import annotations

from specpair.engines.launch_model import Launch, Preflights
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_18.args import DEFAULTS
from specpair.engines.sglang_0_5_18.facts import DSPARK_NESTED_CONFIG
from specpair.engines.sglang_0_5_23 import launch as base
from specpair.model.common import Method

# server_args.py:143 QUANTIZATION_CHOICES: 0.5.23's and `marlin`
QUANTIZATION = tuple(q for name in base.QUANTIZATION
                     for q in ((name, "marlin") if name == "gptq" else (name,)))


def build(pair: EngineInput, speculate: bool = True) -> Launch:
    launch = base.build(pair, speculate, DEFAULTS, QUANTIZATION)
    checks = Preflights(DEFAULTS.engine)
    fact = DSPARK_NESTED_CONFIG
    # the lock does not keep where a draft config puts markov_rank, and every published
    # DSpark draft nests it under dflash_config, which 0.5.18 does not read
    checks.need(not (speculate and pair.runbook.speculation.method is Method.DSPARK),
                "speculation.method", f"{fact.here} ({fact.source}): {fact.effect}",
                "serve the pair with sglang 0.5.23, which reads dflash_config "
                "(speculative/dspark_components/dspark_config.py)")
    launch.preflight.extend(checks)
    return launch
