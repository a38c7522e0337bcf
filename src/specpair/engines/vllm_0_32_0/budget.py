"""vLLM 0.32.0's KV budget: vLLM 0.33.0's (`vllm_0_33_0/budget.py`, its start-up order and
formulas are the same in both wheels) but for the one reviewed difference in `facts.py`
DIFFERENCES of kind `budget`, "GDN hybrid block size".

Prefix caching is on by default for hybrids (ModelConfig.is_prefix_caching_supported),
which puts the state cache in mode `align`; 0.32.0's GDN layer keeps MambaBase's
get_kv_cache_spec (no prefill checkpoint alignment, no checkpoint block: vllm 0.32.0
platforms/interface.py:939 `_align_hybrid_block_size`, v1/kv_cache_interface.py:1042
`num_prefill_checkpoint_blocks = 0`), so blocks align to the attention kernel block only
and a request keeps 2 + K state blocks. 0.33.0 added FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
= 64 and one checkpoint block.
"""

from __future__ import annotations

from specpair.engines.vllm_0_32_0.facts import PROFILE
from specpair.engines.vllm_0_33_0 import budget as v0_33_0
from specpair.engines.vllm_0_33_0.capacity import IN_FLIGHT_BATCHES

__all__ = ["ENGINE", "IN_FLIGHT_BATCHES", "RULES", "Rules", "block_plan", "budget", "kv_plan",
           "recap", "reschedule", "state_plan"]

ENGINE = PROFILE.label


class Rules(v0_33_0.Rules):
    gdn_checkpoint_alignment = None  # DIFFERENCES "GDN hybrid block size"


RULES = Rules(ENGINE)
state_plan = RULES.state_plan
block_plan = RULES.block_plan
kv_plan = RULES.kv_plan
budget = RULES.budget
recap = RULES.recap
reschedule = RULES.reschedule
