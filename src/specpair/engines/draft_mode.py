"""Draft-mode overrides of a target's config (engines/<release>/draft_mode.py): what an
engine release changes in the target's config when it loads the draft that lives in the
target checkpoint (built-in MTP layers)."""

from __future__ import annotations

from collections.abc import Callable

from specpair.engines import engine_lists
from specpair.model.geometry import Geometry


def engine_rewrites(engine: str) -> Callable[[Geometry], Geometry]:
    """The override of a release whose draft mode sets `num_nextn_predict_layers` by
    architecture as its own code does (its engine_lists.yaml `built_in_mtp_layers`, read
    from the release's `ModelConfig._config_draft_model`; vLLM's by architecture, then by
    model type, from `SpeculativeConfig.hf_config_override` and the MTP class it selects):
    some set it whether or not the config names a count."""
    def draft_mode(target: Geometry) -> Geometry:
        lists = engine_lists.of(engine)
        entry = lists.built_in_mtp_layers.get(target.architecture)
        if entry is None and target.model_type is not None:
            entry = lists.built_in_mtp_layers_by_model_type.get(target.model_type)
        if entry is None:
            return target
        layers = entry.layers(target.num_nextn_predict_layers)
        if layers is None or layers == target.num_nextn_predict_layers:
            return target
        return target.model_copy(update={"num_nextn_predict_layers": layers})
    return draft_mode
