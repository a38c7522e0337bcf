"""How vLLM 0.33.0 reads a target's config for the MTP layers that live in its checkpoint
(`SpeculativeConfig.hf_config_override`, vllm/config/speculative.py, and the MTP model
classes it selects)."""

from __future__ import annotations

from specpair.engines.draft_mode import built_in_layers

# Checkpoints whose MTP model class takes one layer when the config names none:
# Qwen3NextMTP.num_mtp_layers = getattr(config, "num_nextn_predict_layers", 1)
# (models/qwen3_next_mtp.py:63); Qwen3_5MTP / Qwen3_5MoeMTP count `mtp_num_hidden_layers`,
# default 1 (models/qwen3_5_mtp.py:82), which the published Qwen3.5 configs set to 1
BUILT_IN_MTP_LAYERS = {
    "Qwen3NextForCausalLM": 1,
    "Qwen3_5ForConditionalGeneration": 1,
    "Qwen3_5MoeForConditionalGeneration": 1,
}


geometry = built_in_layers(BUILT_IN_MTP_LAYERS)
