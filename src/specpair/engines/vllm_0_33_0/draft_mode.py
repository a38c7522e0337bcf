"""How vLLM 0.33.0 reads a target's config for the MTP layers that live in its checkpoint
(vllm/config/speculative.py `SpeculativeConfig.hf_config_override`, and the MTP model
class it selects, which sets `num_mtp_layers`: Qwen3NextMTP one layer where the config
names none): the counts are read from that code into engine_lists.yaml."""

from __future__ import annotations

from specpair.engines.draft_mode import engine_rewrites
from specpair.engines.vllm_0_33_0.facts import PROFILE

geometry = engine_rewrites(PROFILE.label)
