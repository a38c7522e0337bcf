"""How SGLang 0.5.23 reads a target's config for the draft that lives in its checkpoint
(`ModelConfig(..., is_draft_model=True)`, sglang 0.5.23 python/sglang/srt/configs/
model_config.py ModelConfig._config_draft_model): the layer counts it sets per
architecture are read from that code into engine_lists.yaml."""

from __future__ import annotations

from specpair.engines.draft_mode import engine_rewrites
from specpair.engines.sglang_0_5_23.facts import PROFILE

geometry = engine_rewrites(PROFILE.label)
