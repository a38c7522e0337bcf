"""vLLM 0.34.0: vLLM 0.33.0's facts but for the differences read in both wheels
(vllm-0.34.0 and vllm-0.33.0, cp38-abi3 manylinux_2_28); paths are in the 0.34.0 wheel
unless a line says 0.33.0."""

from __future__ import annotations

from dataclasses import replace

from specpair.engines.reviewed import ReleaseFact
from specpair.engines.vllm_0_33_0 import facts as v0_33_0

# The method spellings are 0.33.0's (SpeculativeMethod, config/speculative.py:90-97, has
# eagle, eagle3, mtp, draft_model, dflash, dspark and ngram in both). The heterogeneous-
# vocabulary mode is gone (DIFFERENCES "use_heterogeneous_vocab"), so is the capability.
PROFILE = replace(
    v0_33_0.PROFILE, version="0.34.0",
    default_page_size=64,  # CacheConfig.DEFAULT_BLOCK_SIZE, config/cache.py:185
    capabilities=v0_33_0.PROFILE.capabilities - {"heterogeneous_vocab"})

STILL_HETEROGENEOUS = "vllm 0.33.0"
"""The newest supported release that still has `use_heterogeneous_vocab`."""

# The speculator a draft checkpoint declares (`SpeculativeDraftModel.speculator_config_class`
# of the model class its architecture names in _SPECULATIVE_DECODING_MODELS,
# model_executor/models/registry.py:677), as the config class's `base_method`: a configured
# method other than it is refused (v1/worker/gpu/spec_decode/speculator_config.py:404-427).
# EAGLE-3 heads and standalone drafts declare none. Keyed by the checkpoint's architecture
# as written: the rewrites `SpeculativeConfig.hf_config_override` applies first (a Qwen3
# "DSparkDraftModel" read as Qwen3DSparkModel, config/speculative.py) are not followed.
# tests/engine/test_method_support.py holds this table equal to 0.34.0's registry.
DECLARED_SPECULATOR: dict[str, str] = {
    **dict.fromkeys((
        "DFlash2BeamDraftModel", "DFlash2DraftModel", "DFlash2RicursiveDraftModel",
        "DFlashDraftModel", "DFlashLagunaForCausalLM", "DFlashMuseGlimmerAssistantModel",
        "DFlashQwen3XPressModel", "LiLiCorrDraftModel", "MuseGlimmerAssistantModel",
        "Qwen3XPressModel"), "dflash"),
    **dict.fromkeys((
        "DSparkMiniMaxDraftModel", "Gemma4DSparkModel", "K3DSparkModel",
        "MuseSparkDSparkModel", "Qwen3DSparkModel", "Qwen3OmniDSparkModel"), "dspark"),
    "Gemma4MTPModel": "mtp",
}

EXTENSIBLE_DEFAULT_MEMORY_UTILIZATION = 1.0
"""CacheConfig.resolved_gpu_memory_utilization with the extensible cache on
(config/cache.py:495-501); 0.92 (DEFAULT_GPU_MEMORY_UTILIZATION) with it off."""

COMPARED_WITH = "vllm 0.33.0"
# Read in both wheels. Everything specpair's commands and budget read and not listed here
# is the same in both releases: the max_num_seqs / max_num_batched_tokens tiers
# (EngineArgs.get_batch_defaults, engine/arg_utils.py:2977, byte-identical), the KV dtype
# choices (config/cache.py CacheDType), the SpeculativeConfig keys specpair writes other
# than use_heterogeneous_vocab, the draft-TP rule (config/speculative.py:1532-1550), the
# schedule lookup (v1/spec_decode/dynamic/utils.py, byte-identical), the /metrics names
# (v1/spec_decode/metrics.py byte-identical; v1/metrics/loggers.py differs only in
# f-strings of its log prefixes), "Loading weights took" (model_loader/default_loader.py:544)
# and "init engine (profile, create kv cache, warmup model) took" (v1/engine/core.py:459),
# the GDN prefill checkpoint alignment (v1/attention/backends/gdn_attn.py:35, 64).
DIFFERENCES = (
    ReleaseFact("default", "KV cache sizing",
                "extensible KV cache on by default on CUDA/ROCm: sized after warmup and "
                "graph capture from measured free memory, min(requested − non_kv_used, "
                "headroom − margin) − max(transient peak, torch reserve growth); off when "
                "kv_cache_memory_bytes is set",
                "profiled before graph capture: requested = total · gpu_memory_utilization "
                "less weights, non-torch, activation peak and graph estimate",
                "specpair pins the KV bytes (--kv-cache-memory-bytes, deployment."
                "kv_cache_sizing: pinned) or budgets the measured mode as an estimate",
                "config/vllm.py:3180-3254, v1/worker/extensible_kv_cache.py:592-618"),
    ReleaseFact("default", "gpu_memory_utilization",
                "1.0 with the extensible cache on, 0.92 with it off",
                "0.92",
                "a measured launch asks for the whole GPU; the pinned KV bytes are computed "
                "with 0.92",
                "config/cache.py:216, :495-501"),
    ReleaseFact("default", "block size",
                "64",
                "16",
                "larger blocks: bytes per block × 4, full-context blocks per request ÷ 4",
                "config/cache.py:185"),
    ReleaseFact("rule", "Model Runner V1",
                "removed: any VLLM_USE_V2_MODEL_RUNNER other than 1 fails start-up",
                "selectable (VLLM_USE_V2_MODEL_RUNNER=0)",
                "no V1 guard on the schedule; the heterogeneous mode, which needed V1, "
                "is gone",
                "platforms/interface.py:1481-1491"),
    ReleaseFact("flag", "--speculative-config use_heterogeneous_vocab",
                "removed (v1/spec_decode/vocab_mapping.py deleted); an unknown key fails",
                "a SpeculativeConfig field (TLI)",
                "a draft with its own vocabulary is refused by name; vllm 0.33.0 has it",
                "config/speculative.py (0.33.0 :496), config/utils.py:72 extra='forbid'"),
    ReleaseFact("flag", "--speculative-config disable_padded_drafter_batch, method custom_class",
                "removed",
                "SpeculativeConfig field; method literal",
                "none: specpair writes neither",
                "0.33.0 config/speculative.py:468, :78"),
    ReleaseFact("flag", "--speculative-config draft_decode_context_parallel_size, "
                "speculator_options, "
                "suffix_decoding_corpus_tokens, custom_method",
                "added",
                "absent",
                "none: specpair runs no decode context parallelism and no custom or "
                "suffix speculator; their defaults leave its pairs as they were",
                "config/speculative.py:479, :484, :592, :700"),
    ReleaseFact("flag", "--speculative-config parallel_drafting",
                "deprecated, no effect: DFlash/DSpark always draft in parallel",
                "effective for EAGLE and draft models",
                "none: specpair never set it",
                "config/speculative.py:559"),
    ReleaseFact("rule", "configured method against the draft's declared speculator",
                "refused when they differ",
                "no check",
                "a DFlash/DSpark/Gemma-4 MTP draft with another method is a start-up "
                "error; the launch pre-flight refuses it with the engine's words",
                "v1/worker/gpu/spec_decode/speculator_config.py:404-427"),
    ReleaseFact("rule", "per-batch schedule on Model Runner V1",
                "no V1: only the data-parallel refusal stays",
                "dropped for methods V1 cannot truncate (_maybe_disable_dynamic_sd_for_v1)",
                "a schedule is refused for data parallelism > 1 only",
                "config/vllm.py:1031 (0.33.0 :1088)"),
    ReleaseFact("rule", "DFlash / DSpark running sequences",
                "max_num_active_seqs capped at max_num_batched_tokens // the draft pass's "
                "queries per request (DFlash and non-anchor DSpark: K + 1; anchor DSpark: "
                "K)",
                "max_num_seqs",
                "fewer running requests per step than --max-num-seqs",
                "config/vllm.py:2300-2319, v1/worker/gpu/spec_decode/dflash/config.py:52-60,"
                " dspark/config.py:129-137"),
    ReleaseFact("rule", "async scheduling with speculation",
                "on for every method unless pooling or the executor refuses",
                "off when Model Runner V1 cannot run it (v1_async_sched_incompat)",
                "two batches in flight (the budget's in-flight tokens) for every pair",
                "config/vllm.py:1610-1637"),
    ReleaseFact("flag", "--quantization",
                "fp_quant removed; w4afp8, lut_b_moe, mxfp4_hadamard32 added",
                "has fp_quant",
                "a checkpoint quantized with fp_quant is refused on 0.34.0",
                "model_executor/layers/quantization/__init__.py:15"),
    ReleaseFact("flag", "--enable-extensible-kv-cache / --no-enable-extensible-kv-cache",
                "added",
                "absent",
                "specpair does not pass it: --kv-cache-memory-bytes "
                "turns the cache off itself",
                "engine/arg_utils.py:1413"),
    ReleaseFact("module", "Graph capturing finished in %.0f secs",
                "v1/worker/gpu/model_runner.py:1217",
                "v1/worker/gpu_model_runner.py:6517 (V1) and gpu/model_runner.py:1164",
                "the same pattern, another file",
                "v1/worker/gpu/model_runner.py:1217"),
    ReleaseFact("module", "image and dependencies",
                "vllm/vllm-openai:v0.34.0; transformers>=5.16.1,<5.23, torch==2.14.0, "
                "flashinfer-python==0.7.3",
                "vllm/vllm-openai:v0.33.0; transformers>=5.16.1,<5.21, torch==2.14.0, "
                "flashinfer-python==0.7.2.post1",
                "the image carries them; the transformers specpair reads configs with "
                "(5.19.0, pyproject.toml) is within both pins",
                "vllm-0.34.0.dist-info/METADATA"),
)
