"""How SGLang 0.5.23 reads a target's config for the draft that lives in its checkpoint
(`ModelConfig(..., is_draft_model=True)`, srt/configs/model_config.py)."""

from __future__ import annotations

from specpair.engines.draft_mode import built_in_layers

# Checkpoints that ship one built-in MTP layer without `num_nextn_predict_layers` in their
# config: draft mode sets it to 1 for these architectures (configs/model_config.py: the
# Qwen3-Next rewrite to Qwen3NextForCausalLMMTP and the Qwen3.5 rewrite to
# Qwen3_5ForCausalLMMTP)
BUILT_IN_MTP_LAYERS = {
    "Qwen3NextForCausalLM": 1,
    "Qwen3_5ForConditionalGeneration": 1,
    "Qwen3_5MoeForConditionalGeneration": 1,
}


geometry = built_in_layers(BUILT_IN_MTP_LAYERS)
