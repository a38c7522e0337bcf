"""SGLang 0.5.18, the release that made DFlash, DSpark and MTP
generally available, as it differs from 0.5.23: read in the
`sglang-0.5.18-cp311-cp311-manylinux_2_34_x86_64.whl` against 0.5.23 (paths in 0.5.18's
wheel, under `sglang/srt/`). Everything specpair's commands and budget read and not listed
here is the same in both releases: the 42 flags specpair writes (0.5.18's parser accepts
every example command), the `--mem-fraction-static` heuristic (`server_args.py:4802`,
`:4952-4980`, `:5080-5110`, the formula of 0.5.23's `arg_groups/memory_hook.py`), the 48
running requests under speculation (`arg_groups/speculative_hook.py:258`), page size 1, the
pool configurators' cells and token counts (its own pool code, tests/engine/
test_kv_oracle.py), the /metrics names and the start-up log lines."""

from __future__ import annotations

from dataclasses import replace

from specpair.engines.reviewed import ReleaseFact
from specpair.engines.sglang_0_5_23 import facts as base

# the same spellings: DFLASH, DSPARK, EAGLE, EAGLE3, FROZEN_KV_MTP, STANDALONE, NGRAM
# (speculative/spec_info.py:38-45); NEXTN is resolved to EAGLE before the enum
# (arg_groups/speculative_hook.py:52)
PROFILE = replace(base.PROFILE, version="0.5.18")

COMPARED_WITH = base.PROFILE.label

DSPARK_NESTED_CONFIG = ReleaseFact(
    "rule", "DSpark draft config",
    "reads markov_rank, block size, noise token and target layers from the draft's "
    "top level (dspark_*) or dspark_config only",
    "also from dflash_config, where the published DSpark drafts nest them",
    "a published DSpark draft (SpecForge's) reads as markov_rank 0 and the server refuses "
    "it at start-up: 'DSPARK requires markov_rank > 0 in the draft config'",
    "speculative/dspark_components/dspark_config.py:175-222, "
    "model_executor/model_runner_components/spec_aux_hidden_state.py:166")

DIFFERENCES = (
    ReleaseFact("default", "--swa-full-tokens-ratio",
                "0.8 in the parser; model overrides (DeepSeek-V4, Inkling: 0.1) replace "
                "any value equal to it, even one set explicitly",
                "no parser default; resolved to the fallback 0.8 when unset, and model "
                "overrides apply only when unset",
                "none for specpair's architectures: both size the SWA pool at 0.8",
                "server_args.py:901, arg_groups/overrides.py:1163"),
    ReleaseFact("default", "--mamba-full-memory-ratio",
                "0.9 in the parser", "no parser default; resolved to the fallback 0.9",
                "none: specpair passes the ratio explicitly, and both default to 0.9",
                "server_args.py:2562"),
    ReleaseFact("flag", "--quantization", "also marlin", "no marlin",
                "a target or draft quantized as marlin is accepted on 0.5.18 only",
                "server_args.py:143"),
    ReleaseFact("flag", "--kv-cache-dtype", "also fp4_e2m1", "no fp4_e2m1",
                "none: specpair's KV dtypes (auto, bf16, fp8_e4m3, fp8_e5m2) exist in both",
                "server_args.py:701"),
    ReleaseFact("flag", "removed in 0.5.23",
                "has --cuda-graph-max-bs, --cuda-graph-bs, --disable-piecewise-cuda-graph, "
                "--speculative-dflash-draft-window-size, --enable-gdn-replayssm-spec and "
                "22 more", "absent (--cuda-graph-max-bs is an ambiguous prefix there)",
                "none: specpair writes none of them", "server_args.py:8774, :8782"),
    ReleaseFact("flag", "added in 0.5.23",
                "absent: 80 flags, e.g. --speculative-use-block-verification, "
                "--speculative-draft-sink-size, --attn-dp-size", "present",
                "none: specpair writes none of them", "server_args.py (absent)"),
    DSPARK_NESTED_CONFIG,
    ReleaseFact("module", "argument resolution",
                "in ServerArgs.__post_init__, while parsing (it asks the device for its "
                "kind and memory)", "ServerArgs.resolve_once()",
                "the oracle harnesses stand in for the device before parsing",
                "server_args.py:3585, :3674"),
    ReleaseFact("module", "KV pool inputs",
                "KVCacheConfigurator(ps: ParallelState, ...); resolve_layer_indices(..., "
                "spec_algorithm); then adjust_hybrid_swa_layer_ids; the TP widths read "
                "from the live process groups", "attn_dp_size and pp_size arguments; no "
                "spec_algorithm; no adjust step; widths from the runtime context",
                "none on the numbers: the oracle runs 0.5.18's own steps (one-rank gloo "
                "group, the scheduler's ParallelState) and they equal 0.5.23's",
                "mem_cache/kv_cache_configurator.py:212, model_executor/"
                "model_runner_components/layer_setup.py:117, :210, "
                "model_executor/model_runner.py:576-604, :647-658"),
    ReleaseFact("module", "dependency", "pins transformers 5.12.1", "transformers 5.19.0",
                "the engines session unpacks 0.5.18 with the transformers it pins",
                "wheel METADATA"),
)
