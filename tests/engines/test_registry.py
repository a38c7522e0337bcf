"""The allowlist of verified KV layouts: entries name real corpus configs, and anything
else is refused by name or budgeted only as declared, marked unverified everywhere."""

from __future__ import annotations

import json

import pytest

from specpair.analyse.budget import compute
from specpair.engines import registry as engines
from specpair.engines import verified_layouts
from specpair.generate.budget_files import markdown
from specpair.model.config_geometry import from_hf_config
from specpair.model.errors import SpecpairError
from tests.support.geometries import dense
from tests.support.pairs import make_pair
from tests.support.paths import FIXTURES

CONFIGS = FIXTURES / "configs"


@pytest.mark.parametrize("engine", sorted(verified_layouts.verified()))
def test_every_entry_names_corpus_configs_of_its_architecture(engine: str) -> None:
    for architecture, folders in verified_layouts.verified()[engine].items():
        assert folders, architecture
        for folder in folders:
            root = CONFIGS if (CONFIGS / folder).is_dir() else FIXTURES / "corpus"
            g = from_hf_config(json.loads((root / folder / "config.json").read_text()))
            if architecture.endswith(" MTP layers"):
                # the target's built-in draft layers: the config, as the release reads it
                # in draft mode, must ship some
                assert architecture == f"{g.architecture} MTP layers", folder
                assert engines.by_label(engine).draft_mode(g).num_nextn_predict_layers > 0, \
                    folder
            else:
                assert g.architecture == architecture, folder


def test_an_unverified_architecture_is_refused_by_name() -> None:
    nas = dense(36).model_copy(update={"architecture": "DeciLMForCausalLM"})
    pair = make_pair(nas, None, speculation={"method": "NGRAM", "num_speculative_tokens": 3})
    with pytest.raises(SpecpairError) as raised:
        compute(pair)
    text = str(raised.value)
    assert "DeciLMForCausalLM" in text and "not verified for sglang 0.5.23" in text
    assert "unverified_layouts: [DeciLMForCausalLM]" in text  # what would make it budget


def test_a_declared_unverified_architecture_is_marked_in_the_budget_page() -> None:
    nas = dense(36).model_copy(update={"architecture": "DeciLMForCausalLM"})
    pair = make_pair(nas, None, speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     deployment={"assumptions": {"unverified_layouts": ["DeciLMForCausalLM"]}})
    budget = compute(pair)
    assert len(budget.unverified) == 1 and "DeciLMForCausalLM" in budget.unverified[0]
    assert "**Unverified budget**" in markdown(pair, budget)
    assert budget.model_dump(mode="json")["unverified"] == budget.unverified


def test_declaring_one_architecture_does_not_cover_another() -> None:
    nas = dense(36).model_copy(update={"architecture": "DeciLMForCausalLM"})
    pair = make_pair(nas, None, speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     deployment={"assumptions": {"unverified_layouts": ["Gemma3ForCausalLM"]}})
    with pytest.raises(SpecpairError, match="DeciLMForCausalLM"):
        compute(pair)


def test_a_verified_pair_carries_no_unverified_note() -> None:
    pair = make_pair(dense(36), None, speculation={"method": "NGRAM",
                                                   "num_speculative_tokens": 3})
    assert compute(pair).unverified == []


def test_the_readme_table_is_the_registrys() -> None:
    readme = (FIXTURES.parents[1] / "README.md").read_text(encoding="utf-8")
    begin = readme.index(verified_layouts.README_BEGIN)
    end = readme.index(verified_layouts.README_END) + len(verified_layouts.README_END)
    indent = readme[readme.rindex("\n", 0, begin) + 1:begin]
    block = "\n".join(line.removeprefix(indent) for line in readme[begin:end].split("\n"))
    assert block + "\n" == verified_layouts.architectures_markdown(), (
        "README's architecture table is stale: paste specpair.engines.verified_layouts."
        "architectures_markdown() between its markers")
    # what the table says comes from the data, not from text written by hand
    assert "| `Llama4ForConditionalGeneration` | verified | verified |" in block
    assert "`block_configs`" in block


MINICPM3 = FIXTURES / "corpus" / "openbmb__MiniCPM3-4B" / "config.json"


@pytest.mark.parametrize("engine, served", [("vllm 0.33.0", False), ("sglang 0.5.23", True)])
def test_a_layout_the_release_sizes_otherwise_is_refused_though_declared(
        engine: str, served: bool) -> None:
    """MiniCPM3's config carries MLA keys (kv_lora_rank). vLLM serves only the model types
    of its is_deepseek_mla list with the MLA cache (engine_lists.yaml, held equal to the
    release by tests/engine/test_copied_decisions.py); minicpm3 is not one, so its model
    class keeps full K and V per head (`specpair verify` found 3.3× fewer tokens than the
    port's MLA reading). Declaring it unverified must not print that number; SGLang
    serves the architecture with MLA, and the declaration budgets it there."""
    minicpm3 = from_hf_config(json.loads(MINICPM3.read_text(encoding="utf-8")))
    assert minicpm3.attention == "mla"
    name, version = engine.split()
    declared = {"assumptions": {"unverified_layouts": [minicpm3.architecture]}}
    pair = make_pair(minicpm3, None, engine=name, version=version,
                     speculation={"method": "NGRAM", "num_speculative_tokens": 3},
                     deployment=declared)
    if served:
        assert compute(pair).unverified  # budgeted, marked unverified
        return
    with pytest.raises(SpecpairError) as raised:
        compute(pair)
    text = str(raised.value)
    assert "does not serve model type minicpm3 with its MLA cache" in text
    assert "specpair verify" in text
