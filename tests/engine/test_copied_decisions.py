"""Nothing an engine decides by architecture name is copied by hand (issue 54): each
release's engine_lists.yaml must be what the release's own code answers
(tests/engine/engine_lists.py reads it; tools/engine_lists.py rewrites the file), and the
budget and launch must follow the file."""

from __future__ import annotations

import pytest

from specpair.engines import engine_lists
from specpair.engines.draft_mode import engine_rewrites
from specpair.engines.sglang_0_5_23.kv_cells import uses_hybrid_swa_pools
from specpair.lock.hub import engine_classes
from specpair.model import hf_config
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry, LayerKind
from tests.engine import releases, workers
from tests.support.geometries import dense


@pytest.mark.parametrize("engine", (*releases.SGLANG, *releases.VLLM))
def test_lists_are_the_release_s(engine: str) -> None:
    entry = engine.split()[0]
    found = workers.call("engine_lists", entry, releases.env(engine), None, timeout=900)
    ours = engine_lists.raw(engine)
    differ = {key: {"only the release": sorted(set(found[key]) - set(ours.get(key) or ())),
                    "only ours": sorted(set(ours.get(key) or ()) - set(found[key])),
                    "changed": sorted(a for a in set(found[key]) & set(ours.get(key) or ())
                                      if isinstance(found[key], dict)
                                      and found[key][a] != ours[key][a])}
              for key in found}
    assert all(not any(d.values()) for d in differ.values()), (
        f"{engine}'s engine_lists.yaml differs from the release (rerun tools/engine_lists.py)"
        f": {differ}")
    assert set(ours) == set(found)


def _sliding(architecture: str, kinds: list[LayerKind]) -> Geometry:
    return dense(len(kinds)).model_copy(update={
        "architecture": architecture, "full_attention_layers": kinds.count("full"),
        "sliding_window_layers": kinds.count("sliding"), "sliding_window": 128,
    }).in_layer_order(kinds)


@pytest.mark.parametrize("engine", releases.SGLANG)
def test_sglang_budget_follows_the_lists(engine: str) -> None:
    lists = engine_lists.of(engine)
    kinds: list[LayerKind] = ["sliding", "full"] * 4
    for arch, rule in lists.hybrid_swa.items():
        g = _sliding(arch, kinds)
        assert not uses_hybrid_swa_pools(g, False, engine)
        if rule == "layer_types":
            assert uses_hybrid_swa_pools(g, True, engine), arch
        elif rule == "own":
            with pytest.raises(SpecpairError, match="not modelled"):
                uses_hybrid_swa_pools(g, True, engine)
    assert not uses_hybrid_swa_pools(_sliding("Gemma3ForCausalLM", kinds), True, engine)
    draft_mode = engine_rewrites(engine)
    for arch, entry in lists.built_in_mtp_layers.items():
        g = dense(4).model_copy(update={"architecture": arch})
        assert draft_mode(g).num_nextn_predict_layers == (entry.unset or 0), arch


@pytest.mark.parametrize("engine", releases.VLLM)
def test_vllm_draft_mode_follows_the_lists(engine: str) -> None:
    lists = engine_lists.of(engine)
    draft_mode = engine_rewrites(engine)
    assert lists.built_in_mtp_layers or lists.built_in_mtp_layers_by_model_type
    for arch, entry in lists.built_in_mtp_layers.items():
        g = dense(4).model_copy(update={"architecture": arch, "model_type": "unlisted"})
        assert draft_mode(g).num_nextn_predict_layers == (entry.unset or 0), arch
        assert draft_mode(g.model_copy(update={"num_nextn_predict_layers": 3})
                          ).num_nextn_predict_layers == entry.layers(3), arch
    for model_type, entry in lists.built_in_mtp_layers_by_model_type.items():
        g = dense(4).model_copy(update={"architecture": "UnlistedForCausalLM",
                                        "model_type": model_type})
        assert draft_mode(g).num_nextn_predict_layers == (entry.unset or 0), model_type


def test_the_lock_reads_configs_as_the_registries_do() -> None:
    """Each model type a release reads with a class of its own registry is read through
    what the lock records of it: renamed keys under their attributes (where transformers
    has no class), aliases through the transformers class they name."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    classes = engine_classes()
    assert any(e.renamed for e in classes.values()) and any(e.reads_as for e in classes.values())
    for model_type, entry in classes.items():
        renamed = {key: 1000 + i for i, key in enumerate(sorted(set(entry.renamed.values())))}
        read = hf_config.renamed({"model_type": model_type, **renamed}, classes)
        # where transformers has a class, a release without its own reads through it: the
        # renamed keys are not every release's, and the own-class refusal names them
        if entry.conflict is None and hf_config.reading_class(model_type, classes) is None:
            for attribute, key in entry.renamed.items():
                if attribute in renamed:  # a key another attribute is read from: as given
                    continue
                assert read[attribute] == renamed[key], (model_type, attribute)
        if entry.reads_as and entry.reads_as in CONFIG_MAPPING:
            assert hf_config.reading_class(model_type, classes) == \
                CONFIG_MAPPING[entry.reads_as].__name__, model_type


@pytest.mark.parametrize("engine", releases.VLLM)
def test_a_window_on_every_layer_is_refused_where_the_release_keeps_one(engine: str) -> None:
    """vLLM gives every layer a window-sized cache when a config has a sliding window and
    no layer_types (its `EngineArgs.create_engine_config` sets `CacheConfig.sliding_window`,
    asked of that function by the harness, `cache_window`). Over every config of the
    outside corpus and the pairs' configs, read by the release's own `ModelConfig`: specpair
    reads a target's every layer as sliding with that window, or refuses it by its
    `sliding_window` key, exactly where the release keeps such a cache (before, a list of
    model types copied by hand missed PhiMoE). The whole-corpus KV oracle then holds the
    budgets of such layouts exact."""
    import json

    from specpair.model.config_geometry import NotModelled
    from tests.engine.corpus import CONFIGS, CORPUS, geometry
    from tests.engine.kv_cases import run_engine

    folders = [(CORPUS, e["folder"]) for e in json.loads(
        (CORPUS / "SOURCES.json").read_text(encoding="utf-8"))]
    folders += [(CONFIGS, p.parent.name) for p in sorted(CONFIGS.glob("*/config.json"))]
    answers = run_engine("vllm_kv_plan.py", [
        {"ask": "cache_window", "target": str(root / folder), "max_model_len": 2048}
        for root, folder in folders], releases.env(engine))
    differ, windowed = {}, 0
    for (root, folder), answer in zip(folders, answers, strict=True):
        if not answer["ok"]:
            continue  # the release cannot read the config (custom code): nothing it sizes
        try:
            g = geometry(folder, root)
            refused_by = None
            # layer_types that make every layer sliding: read as such, the same window
            all_sliding = g.sliding_window if g.sliding_window_layers == g.num_hidden_layers \
                else None
        except NotModelled as refusal:
            refused_by, all_sliding = refusal.key, None
        except (ValueError, KeyError, TypeError):
            continue  # not a decoder specpair reads: refused at lock whatever the window
        keeps = answer["cache_window"]
        windowed += keeps is not None
        if (keeps is not None and refused_by is None and all_sliding != keeps) or (
                keeps is None and (refused_by == "sliding_window" or all_sliding)):
            differ[folder] = {"release's window": keeps, "specpair refuses by": refused_by,
                              "specpair's window on every layer": all_sliding}
    assert windowed >= 5, windowed  # the corpus has such configs: the question was asked
    assert not differ, differ
