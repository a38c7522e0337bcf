"""How SGLang 0.5.18 reads a target's config for the draft that lives in its checkpoint
(sglang 0.5.18 python/sglang/srt/configs/model_config.py ModelConfig._config_draft_model):
the layer counts it sets per architecture, read from that code into its own
engine_lists.yaml (fewer architectures than 0.5.23's)."""

from __future__ import annotations

from specpair.engines.draft_mode import engine_rewrites
from specpair.engines.sglang_0_5_18.facts import PROFILE

geometry = engine_rewrites(PROFILE.label)
