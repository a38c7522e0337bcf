"""`vllm serve` for vLLM 0.32.0: vLLM 0.33.0's command (`vllm_0_33_0/launch.py`; the flags,
`SpeculativeConfig` keys, quantization methods and KV dtypes specpair uses are the same in
both wheels) but for the reviewed difference in `facts.py` DIFFERENCES of kind `rule`,
"explicit float KV dtype other than the model's"."""

from __future__ import annotations

from specpair.engines.launch_model import Preflights
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_32_0 import schedule
from specpair.engines.vllm_0_32_0.facts import PROFILE
from specpair.engines.vllm_0_33_0 import launch as v0_33_0

__all__ = ["ENGINE", "LAUNCHER", "Launcher", "build", "heterogeneous_vocab_preflight",
           "speculative_config"]

ENGINE = PROFILE.label


class Launcher(v0_33_0.Launcher):
    def schedule_refusal(self, pair: EngineInput) -> str | None:
        """0.32.0 has no `_maybe_disable_dynamic_sd_for_v1` (schedule.py)."""
        return schedule.refusal(pair)

    def mismatched_float_kv_cache(self, checks: Preflights, kv_float: str, model_dtype: str
                                  ) -> None:
        """0.32.0 has no VllmConfig._reject_mismatched_float_kv_cache (0.33.0 added it):
        the server starts, its cache holding the other float type (the start-up oracle
        accepts it), so the gate warns."""
        checks.need(False, "deployment.kv_cache_dtype",
                    f'kv_cache_dtype="{kv_float}" differs from the model dtype '
                    f'"{model_dtype}": the cache stores the other float type (vLLM 0.33.0 '
                    "refuses this)", "use kv_cache_dtype: auto (or the model's dtype)",
                    severity="warning")


LAUNCHER = Launcher(PROFILE)
speculative_config = LAUNCHER.speculative_config
build = LAUNCHER.build
heterogeneous_vocab_preflight = LAUNCHER.heterogeneous_vocab_preflight
