"""Configs read as the engines' own config registries read them (issue 54 item 3): what
the engines layer passes down (`hf_config.EngineClass`) is applied, and each way it can
refuse names the release and its reason. The data here is made up; that each release's
is its registry's own is tests/engine/test_copied_decisions.py's."""

from __future__ import annotations

import pytest

from specpair.model import hf_config
from specpair.model.config_geometry import NotModelled, from_hf_config

# a ChatGLM-style config: the release's own class reads num_hidden_layers from num_layers,
# vocab_size from padded_vocab_size and max_position_embeddings from seq_length
GLM = {"model_type": "glm_like", "architectures": ["GlmLikeModel"], "num_layers": 40,
       "hidden_size": 4096, "num_attention_heads": 32, "multi_query_group_num": 2,
       "padded_vocab_size": 151552, "seq_length": 131072}
GLM_CLASS = hf_config.EngineClass(
    renamed={"num_hidden_layers": "num_layers", "vocab_size": "padded_vocab_size",
             "max_position_embeddings": "seq_length", "n_head_kv": "multi_query_group_num"},
    readers=("sglang 9.9.9 GlmLikeConfig",))


def test_renamed_keys_are_read_under_their_attributes() -> None:
    with pytest.raises(ValueError, match="vocab_size, max_position_embeddings not in"):
        from_hf_config(dict(GLM))  # as written, nothing supplies them
    g = from_hf_config(dict(GLM), {"glm_like": GLM_CLASS})
    assert (g.num_hidden_layers, g.num_key_value_heads, g.head_dim) == (40, 2, 128)
    assert (g.vocab_size, g.max_position_embeddings) == (151552, 131072)
    source = hf_config.read(dict(GLM), {"glm_like": GLM_CLASS}).source
    assert source.endswith("keys renamed as sglang 9.9.9 GlmLikeConfig read them")


def test_a_key_the_file_spells_wins_over_its_renamed_one() -> None:
    config = {**GLM, "num_hidden_layers": 12}
    assert from_hf_config(config, {"glm_like": GLM_CLASS}).num_hidden_layers == 12


def test_an_alias_is_read_through_the_class_it_names() -> None:
    alias = {"my_v3": hf_config.EngineClass(reads_as="deepseek_v3")}
    assert hf_config.reading_class("my_v3") is None
    assert hf_config.reading_class("my_v3", alias) == "DeepseekV3Config"


def test_a_layout_fact_from_transformers_default_is_refused_for_an_own_class() -> None:
    # Qwen3 through transformers' class: head_dim defaults when the file leaves it out
    qwen3 = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
             "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
             "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 4096}
    assert from_hf_config(dict(qwen3)).head_dim == 128
    own = {"qwen3": hf_config.EngineClass(readers=("vllm 9.9.9 OwnQwen3Config",))}
    with pytest.raises(NotModelled, match=r"head_dim .*vllm 9\.9\.9 OwnQwen3Config"):
        from_hf_config(dict(qwen3), own)
    assert from_hf_config({**qwen3, "head_dim": 64}, own).head_dim == 64


def test_releases_that_read_a_model_type_differently_are_refused_by_name() -> None:
    conflict = {"glm_like": hf_config.EngineClass(
        renamed=GLM_CLASS.renamed, readers=GLM_CLASS.readers,
        conflict="sglang 9.9.9 GlmLikeConfig reads num_hidden_layers from num_layers, "
                 "another release from n_layers")}
    with pytest.raises(NotModelled, match=r"not modelled: model_type .*n_layers"):
        from_hf_config(dict(GLM), conflict)
