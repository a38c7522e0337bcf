"""Which of a MoE checkpoint's bytes are its routed experts': read from the config's
quantization_config, never guessed, and refused by name where they cannot be placed.

Before this, a checkpoint whose lock counts fewer parameters than its experts (gpt-oss's
MXFP4 experts, declared as bytes / BF16 size) lost its expert layout without a word, and
the step model read all 65 GB of gpt-oss-120b on every decode step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specpair.analyse.step_inputs import EXPERT_BYTES, architecture, unmodelled
from specpair.commands.build import load_pairs
from specpair.model.config_geometry import from_hf_config
from specpair.model.geometry import EXPERT_FORMAT_BYTES
from tests.support.pairs import artifact, make_pair
from tests.support.paths import REPO

CONFIGS = REPO / "tests" / "fixtures" / "configs"
CORPUS = REPO / "tests" / "fixtures" / "corpus"

GPT_OSS_TOTAL_PARAMS = 116.8e9
"""gpt-oss-120b's published parameter count (the gpt-oss model card: 116.8B total, 5.1B
active, a 60.8 GiB checkpoint with its MoE weights in MXFP4 and the rest in BF16)."""


def _config(folder: Path) -> dict[str, object]:
    return json.loads((folder / "config.json").read_text())


def _example(name: str):  # type: ignore[no-untyped-def]
    return next(p for p in load_pairs(REPO) if p.runbook.pair.name == name)


def test_gpt_oss_experts_and_bf16_rest_make_up_the_published_checkpoint() -> None:
    """The example's lock (the config's expert layout, the published 60.8 GiB) with MXFP4
    experts and a BF16 remainder gives the model card's parameter count: the split the
    step model reads is the checkpoint's, not an average."""
    pair = _example("gpt-oss-120b-ngram-sglang-0-5-18")
    moe = pair.target.geometry.moe
    assert moe is not None and moe.weight_format == "mxfp4"
    arch = architecture(pair.target, pair.target_own_weight_bytes,
                        pair.target_own_active_params)
    assert arch.routed_params == moe.routed_params  # the experts are kept, not dropped
    routed_bytes = arch.routed_params * arch.routed_bytes_per_param
    dense_params = (pair.target_own_weight_bytes - routed_bytes) / 2  # BF16
    total = dense_params + arch.routed_params
    assert abs(total / GPT_OSS_TOTAL_PARAMS - 1) < 0.005, total


def test_gpt_oss_decode_reads_its_touched_experts_not_the_whole_checkpoint() -> None:
    """At batch 1 a decode step reads the dense part and 4 of 128 experts per layer: far
    less than the 65 GB checkpoint (2 × H100, TP 2: 32.6 GB a rank, ≥ 9.7 ms even at the
    datasheet peak)."""
    pair = _example("gpt-oss-120b-ngram-sglang-0-5-18")
    generated = REPO / "runbooks" / pair.runbook.pair.name / "generated" / "breakeven.json"
    first = json.loads(generated.read_text())["curve"][0]
    assert first["concurrency"] == 1
    per_rank = pair.target_own_weight_bytes / pair.runbook.deployment.parallel.tensor
    whole_read_s = per_rank / pair.gpu_spec.bandwidth_bytes_per_s
    assert first["t_decode_s"] < whole_read_s / 2, (first["t_decode_s"], whole_read_s)


@pytest.mark.parametrize("folder", ["openai__gpt-oss-120b", "deepseek-ai__DeepSeek-V3"])
def test_quantized_experts_fit_inside_their_checkpoint(folder: str) -> None:
    moe = from_hf_config(_config(CONFIGS / folder)).moe
    assert moe is not None and moe.bytes_per_param is not None
    published = {"openai__gpt-oss-120b": 60.8 * 2**30,   # the model card's checkpoint
                 "deepseek-ai__DeepSeek-V3": 685e9}       # FP8, the model card's 671B + 14B MTP
    assert moe.routed_params * moe.bytes_per_param < published[folder]


@pytest.mark.parametrize("weight_bytes", [
    595 * 10**9,        # about the published INT4 checkpoint, declared as bytes / BF16 size:
    #                     fewer parameters than the experts alone
    2_100 * 10**9])     # a count that holds all of the model's ~1.03T parameters
def test_an_expert_format_not_read_is_refused_by_name_whatever_the_count(
        weight_bytes: int) -> None:
    """Kimi-K2.5's INT4 experts (compressed-tensors pack-quantized) beside BF16 attention:
    whether or not the lock's count holds the experts, the checkpoint's average bytes per
    parameter would put the wrong share of its bytes in them, so no split is guessed."""
    g = from_hf_config(_config(CORPUS / "moonshotai__Kimi-K2.5"))
    assert g.moe is not None and g.moe.weight_format is None
    assert g.moe.unread_quantization == "compressed-tensors"
    pair = make_pair(g, None, speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     deployment={"gpu": "H200-141GB", "parallel": {"tensor": 8}},
                     target_bytes=weight_bytes)
    refusal = unmodelled(pair)
    assert refusal is not None and refusal.name == EXPERT_BYTES
    assert "compressed-tensors" in refusal.reason and "format" in refusal.reason


def test_an_unquantized_moe_whose_count_cannot_hold_its_experts_is_refused() -> None:
    """Qwen3-30B-A3B in BF16 (no quantization_config) locked with fewer parameters than its
    ~29B routed-expert parameters: the count, not the format, is what cannot be right."""
    g = from_hf_config(_config(CONFIGS / "Qwen__Qwen3-30B-A3B"))
    assert g.moe is not None and g.moe.unread_quantization is None
    pair = make_pair(g, None, speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     target_bytes=40 * 10**9)
    refusal = unmodelled(pair)
    assert refusal is not None and refusal.name == EXPERT_BYTES
    assert "routed-expert parameters exceed" in refusal.reason


def test_a_known_format_that_outweighs_the_checkpoint_is_refused() -> None:
    g = from_hf_config(_config(CONFIGS / "openai__gpt-oss-120b"))
    assert g.moe is not None
    too_small = int(g.moe.routed_params * EXPERT_FORMAT_BYTES["mxfp4"] * 0.9)
    pair = make_pair(g, None, speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     target_bytes=too_small)
    refusal = unmodelled(pair)
    assert refusal is not None and refusal.name == EXPERT_BYTES
    assert "outweigh the checkpoint" in refusal.reason


def test_an_unquantized_moe_keeps_the_checkpoint_average() -> None:
    """Qwen3-30B-A3B in BF16: no quantization_config, the lock's count holds the experts,
    and they are read at the checkpoint's own bytes per parameter."""
    g = from_hf_config(_config(CONFIGS / "Qwen__Qwen3-30B-A3B"))
    assert g.moe is not None and g.moe.weight_format is None
    art = artifact("target", g, weight_bytes=61_000_000_000)
    arch = architecture(art, art.weights.weight_bytes, art.weights.total_params)
    assert arch.routed_params == g.moe.routed_params
    assert arch.routed_bytes_per_param == 0.0 and arch.bytes_per_param == 2.0


def test_experts_left_out_of_an_fp8_quantization_are_not_read_as_fp8() -> None:
    """Qwen3-30B-A3B-FP8's own config quantizes its experts (its exclusions name only the
    routers and norms); the same config with the experts added to modules_to_not_convert
    keeps them in BF16 beside FP8 linears: not fp8, and refused rather than averaged."""
    config = _config(CORPUS / "Qwen__Qwen3-30B-A3B-FP8")
    g = from_hf_config(config)
    assert g.moe is not None and g.moe.weight_format == "fp8"
    assert g.moe.unread_quantization is None
    quant = dict(config["quantization_config"])  # type: ignore[call-overload]
    quant["modules_to_not_convert"] = [*quant["modules_to_not_convert"], "mlp.experts"]
    g = from_hf_config({**config, "quantization_config": quant})
    assert g.moe is not None and g.moe.weight_format is None
    assert g.moe.unread_quantization == "fp8, experts left out"
    pair = make_pair(g, None, speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     target_bytes=64 * 10**9)
    refusal = unmodelled(pair)
    assert refusal is not None and refusal.name == EXPERT_BYTES
    assert "experts left out" in refusal.reason
