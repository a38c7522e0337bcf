"""Geometry from real config.json files, checked against the published model cards and
configs (tests/fixtures/configs/SOURCES.md), not against this code's own output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specpair.model.config_geometry import from_hf_config
from specpair.model.geometry import Geometry, GeometryOverride
from tests.support.paths import FIXTURES


def geometry(folder: str) -> Geometry:
    return from_hf_config(json.loads((FIXTURES / "configs" / folder / "config.json").read_text()))


def test_qwen3_32b_keeps_its_declared_head_dim() -> None:
    g = geometry("Qwen__Qwen3-32B")
    # 5120 / 64 would give 80: the config's head_dim (128) must win
    assert (g.num_hidden_layers, g.num_attention_heads, g.num_key_value_heads, g.head_dim) == (
        64, 64, 8, 128)
    assert g.attention == "mha" and g.full_attention_layers == 64


def test_deepseek_v3_is_mla_with_one_mtp_layer() -> None:
    g = geometry("deepseek-ai__DeepSeek-V3")
    assert g.attention == "mla"
    assert (g.kv_lora_rank, g.qk_rope_head_dim, g.mla_latent_dim) == (512, 64, 576)
    assert g.num_nextn_predict_layers == 1
    assert g.vocab_size == 129280


def test_dflash_draft_block_and_feature_layers() -> None:
    g = geometry("sgl-project__SpecForge-qwen3-8b-dflash")
    assert (g.block_size, g.mask_token_id, g.num_target_layers) == (16, 151669, 36)
    assert g.target_layer_ids == [1, 9, 17, 25, 33]


def test_dspark_draft_block_is_gamma() -> None:
    g = geometry("sgl-project__SpecForge-qwen3-8b-dspark")
    assert g.block_size == 7 and g.num_hidden_layers == 5


def test_speculators_format_reads_nested_layer_config_and_verifier() -> None:
    g = geometry("nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted")
    assert (g.num_hidden_layers, g.hidden_size, g.max_position_embeddings) == (1, 4096, 2048)
    assert g.draft_vocab_size == 32000
    assert g.verifier == "meta-llama/Llama-3.1-8B-Instruct"


def test_hybrid_bailing_schedule() -> None:
    config = {"architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_hybrid",
              "hidden_size": 2560, "num_attention_heads": 32, "num_key_value_heads": 32,
              "head_dim": 128, "num_hidden_layers": 42, "layer_group_size": 6,
              "short_conv_kernel_size": 4, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
              "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 157184,
              "max_position_embeddings": 262144}
    g = from_hf_config(config)
    assert g.full_attention_layers == 7  # MLA at 5, 11, 17, 23, 29, 35, 41
    assert g.linear_attention is not None and g.linear_attention.layers == 35
    assert g.linear_attention.kind == "kda"


def test_override_is_validated() -> None:
    g = geometry("Qwen__Qwen3-8B")
    assert GeometryOverride(head_dim=64).apply(g).head_dim == 64
    with pytest.raises(ValueError, match="must add up"):
        GeometryOverride(num_hidden_layers=40).apply(g)


def test_deepseek_v3_experts_explain_its_37b_active_parameters() -> None:
    moe = geometry("deepseek-ai__DeepSeek-V3").moe
    assert moe is not None
    assert (moe.experts, moe.active_experts, moe.moe_layers) == (256, 8, 58)
    assert moe.expert_params == 3 * 7168 * 2048
    # README: 671B parameters, 37B activated per token. Shared = total − all routed
    # experts; active = shared + top-8 routed. The config alone must reproduce it.
    shared = 671e9 - moe.routed_params
    active = shared + moe.active_experts * moe.expert_params * moe.moe_layers
    assert active == pytest.approx(37e9, rel=0.02)


def test_unknown_layer_kind_is_refused_by_key() -> None:
    from specpair.model.config_geometry import NotModelled

    config = json.loads((FIXTURES / "configs" / "Qwen__Qwen3-8B" / "config.json").read_text())
    # LFM2's short-convolution layers are a kind the layout mapping does not know
    config["layer_types"] = ["full_attention"] * 35 + ["conv"]
    with pytest.raises(NotModelled, match="not modelled: layer_types"):
        from_hf_config(config)
    # a chunked layer without its chunk size is an error, not a full layer
    config["layer_types"] = ["full_attention"] * 35 + ["chunked_attention"]
    with pytest.raises(ValueError, match="attention_chunk_size"):
        from_hf_config(config)


def test_unmodelled_key_is_refused_when_locking(tmp_path: Path) -> None:
    from specpair.lock.hub import geometry_from_config
    from specpair.model.errors import SpecpairError

    text = (FIXTURES / "configs" / "nvidia__Nemotron-H-56B-Base-8K" / "config.json").read_text()
    with pytest.raises(SpecpairError, match="not modelled: hybrid_override_pattern"):
        geometry_from_config(text, str(tmp_path / "config.json"))


@pytest.mark.parametrize(("change", "key"), [
    ({"linear_attn_config": {"kda_layers": [1, 2, 3]}}, "linear_attn_config"),
    ({"mamba_d_state": 128}, "mamba_d_state"),
])
def test_layout_keys_that_are_not_modelled_are_named(change: dict[str, object],
                                                     key: str) -> None:
    from specpair.model.config_geometry import NotModelled

    config = json.loads((FIXTURES / "configs" / "Qwen__Qwen3-8B" / "config.json").read_text())
    with pytest.raises(NotModelled, match=f"not modelled: {key}"):
        from_hf_config({**config, **change})


def test_a_window_on_every_layer_is_read_as_every_layer_sliding_for_a_target_only() -> None:
    """A positive window and no layer_types: every layer of a target takes the window,
    for any model type (vLLM's rule; tests/engine/test_copied_decisions.py asks each
    release which configs it windows, and the whole-corpus oracle holds Mistral-7B's
    budget exact on every release). PhiMoE's published config (window 131072) was read
    as full attention. A draft's own window is not read by either engine (vLLM builds
    the draft's layers with the target's cache config): a SpecForge EAGLE-3 draft keeps
    its window key from Gemma 3 and is read as full attention."""
    mixtral = json.loads((FIXTURES / "configs" / "mistralai__Mixtral-8x7B-v0.1" / "config.json")
                         .read_text())
    assert mixtral["sliding_window"] is None
    assert from_hf_config(mixtral).sliding_window_layers == 0
    windowed = from_hf_config({**mixtral, "sliding_window": 4096})
    assert (windowed.sliding_window_layers, windowed.full_attention_layers,
            windowed.sliding_window) == (mixtral["num_hidden_layers"], 0, 4096)

    corpus = FIXTURES / "corpus"
    phimoe = json.loads((corpus / "sgl-project__ome-testdata-phimoe" / "config.json")
                        .read_text())
    assert phimoe["model_type"] == "phimoe" and "layer_types" not in phimoe
    g = from_hf_config(phimoe)
    assert (g.sliding_window_layers, g.sliding_window) == (phimoe["num_hidden_layers"], 131072)
    draft = json.loads((corpus / "sgl-project__SpecForge-gemma3-1b-eagle3" / "config.json")
                       .read_text())
    assert draft["sliding_window"] == 512 and "layer_types" not in draft
    assert from_hf_config(draft).sliding_window_layers == draft["num_hidden_layers"]
    g = from_hf_config(draft, as_draft=True)
    assert (g.sliding_window_layers, g.sliding_window) == (0, None)
    assert g.full_attention_layers == draft["num_hidden_layers"]


def test_a_window_with_no_layer_types_beside_linear_layers_is_refused() -> None:
    """Gated DeltaNet layers placed by full_attention_interval, a window and no
    layer_types (a model type transformers has no class for, read as written: Qwen3-Next's
    own class derives layer_types): vLLM would give the attention layers the window;
    not modelled."""
    from specpair.model.config_geometry import NotModelled

    config = json.loads((FIXTURES / "configs" / "Qwen__Qwen3-Next-80B-A3B-Thinking"
                         / "config.json").read_text())
    config["model_type"] = "a_hybrid_of_its_own"
    assert "layer_types" not in config and config["full_attention_interval"] == 4
    assert from_hf_config(config).linear_attention is not None
    with pytest.raises(NotModelled, match="not modelled: sliding_window"):
        from_hf_config({**config, "sliding_window": 4096})


def test_llama4_chunked_layers_follow_the_configs_rope_layers() -> None:
    # The published config leaves no_rope_layers to its default (NoPE every 4th layer);
    # the NoPE layers attend to the whole context, the rest keep the current chunk only.
    # SGLang 0.5.23 hard-codes the same split (model_config.py::get_hybrid_layer_ids:
    # full where (i + 1) % 4 == 0)
    config = json.loads((FIXTURES / "configs" / "meta-llama__Llama-4-Scout-17B-16E-Instruct"
                         / "config.json").read_text())
    assert "no_rope_layers" not in config["text_config"]
    g = from_hf_config(config)
    assert g.layers is not None
    assert [layer.kind for layer in g.layers] == [
        "full" if (i + 1) % 4 == 0 else "chunked" for i in range(48)]
    assert g.attention_chunk_size == config["text_config"]["attention_chunk_size"] == 8192
    assert (g.chunked_attention_layers, g.full_attention_layers) == (36, 12)
    assert {(la.kv_heads, la.head_dim) for la in g.layers} == {(8, 128)}


def test_override_keeps_the_layer_order_and_redraws_shapes() -> None:
    g = geometry("openai__gpt-oss-20b")
    assert g.layers is not None
    changed = GeometryOverride(num_key_value_heads=4).apply(g)
    assert changed.layers is not None
    assert [la.kind for la in changed.layers] == [la.kind for la in g.layers]
    assert {la.kv_heads for la in changed.layers} == {4}


def test_gemma3_published_config_gets_its_defaults_from_transformers() -> None:
    # google/gemma-3-1b-it's config.json (MLC's vendored copy, unchanged) has no
    # layer_types: the 5 local : 1 global pattern of the Gemma 3 report (sliding_window_pattern
    # 6) becomes full attention on every 6th layer, as Gemma3TextConfig derives it
    config = json.loads((FIXTURES / "corpus" / "mlc-ai__mlc-llm-preset-gemma3_1b_it"
                         / "config.json").read_text())
    assert "layer_types" not in config and config["sliding_window_pattern"] == 6
    g = from_hf_config(config)
    assert g.layers is not None
    assert [la.kind for la in g.layers] == [
        "full" if (i + 1) % 6 == 0 else "sliding" for i in range(config["num_hidden_layers"])]
    assert g.sliding_window == config["sliding_window"]
    assert g.max_position_embeddings == config["max_position_embeddings"]


def test_the_lock_says_which_class_read_the_config() -> None:
    from specpair.lock.hub import config_source

    llama = (FIXTURES / "configs" / "meta-llama__Llama-3.1-8B-Instruct" / "config.json")
    assert config_source(llama.read_text()) == (
        "config.json through transformers 5.19.0 LlamaConfig")
    # Nemotron-NAS ships its own config class (auto_map): never run, read as written
    nas = FIXTURES / "corpus" / "nvidia__Llama-3_3-Nemotron-Super-49B-v1" / "config.json"
    assert "auto_map" in json.loads(nas.read_text())
    assert "custom config code not run" in config_source(nas.read_text())


def test_nemotron_nas_is_refused_at_lock_by_its_block_configs() -> None:
    # Llama-3.3-Nemotron-Super-49B's published config: num_key_value_heads is null and
    # 31 of its 80 blocks have no attention; reading it as a dense model budgeted 8-13x
    # what the engines keep. Neither engine's KV code can be run on it here (both read
    # block_configs as objects of the checkpoint's own DeciLMConfig, custom code that is
    # not shipped with the corpus), so it is refused, naming the key
    from specpair.lock.hub import geometry_from_config
    from specpair.model.config_geometry import NotModelled
    from specpair.model.errors import SpecpairError

    text = (FIXTURES / "corpus" / "nvidia__Llama-3_3-Nemotron-Super-49B-v1"
            / "config.json").read_text()
    config = json.loads(text)
    assert config["num_key_value_heads"] is None
    assert sum(b["attention"]["no_op"] for b in config["block_configs"]) == 31
    with pytest.raises(NotModelled) as refused:
        from_hf_config(config)
    assert refused.value.key == "block_configs"
    with pytest.raises(SpecpairError, match=r"not modelled: block_configs .*Nemotron-NAS"):
        geometry_from_config(text, "target/config.json")


def test_a_declared_lock_says_which_class_read_its_config() -> None:
    from specpair.lock.declare import declared_artifact
    from specpair.model.lock import Source

    config = FIXTURES / "configs" / "Qwen__Qwen3-8B" / "config.json"
    lock = declared_artifact(Source(repo="Qwen/Qwen3-8B"), config, 16 << 30)
    assert lock.sources["geometry"].endswith("through transformers 5.19.0 Qwen3Config")
    assert "geometry" in lock.unconfirmed  # a declared lock stays declared


def test_a_window_in_a_config_no_class_reads_is_refused() -> None:
    """MiMo-7B (model type `mimo`, which transformers has no class for) keeps a window with
    `use_sliding_window: false`: the engines read it through the checkpoint's own class,
    which specpair does not run, so whether the window stays is not known; refused by key
    rather than guessed either way."""
    from specpair.model.config_geometry import NotModelled

    config = json.loads((FIXTURES / "corpus" / "XiaomiMiMo__MiMo-7B-Base" / "config.json")
                        .read_text())
    assert config["model_type"] == "mimo" and config["use_sliding_window"] is False
    with pytest.raises(NotModelled, match="not modelled: sliding_window"):
        from_hf_config(config)
    assert from_hf_config(config, as_draft=True).sliding_window_layers == 0
