"""What an engine release decides by architecture name, read from the release's own code:
each release's `engine_lists.yaml`, written by tools/engine_lists.py from the release and
held equal to it by tests/engine/test_copied_decisions.py (a list copied by hand lacked
architectures the engine had, issue 54).

SGLang (srt/configs/model_config.py, srt/arg_groups/overrides.py at the release):
- `hybrid_swa`: `is_hybrid_swa_model`'s architectures, which get a full and a SWA pool,
  each with how `get_hybrid_layer_ids` places its SWA layers (`layer_types`,
  `every_fourth_full`, or `own`, a rule specpair does not read);
- `extra_buffer`: `_MAMBA_EXTRA_BUFFER_ARCHS` (the `auto` mamba radix cache strategy);
- `built_in_mtp_layers`: `ModelConfig._config_draft_model`'s `num_nextn_predict_layers`
  for a config that names none (`unset`) and for one that names 3 (`configured_3`).

vLLM (vllm/model_executor/models/config.py at the release):
- `ssm_dtype_from_config`: the architectures whose MODELS_CONFIG_MAP hook
  (`verify_and_update_config`, Qwen3_5ForConditionalGenerationConfig and its subclasses)
  makes the config's `mamba_ssm_dtype` the SSM state dtype; elsewhere it follows the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from specpair.facts.release_data import release_text
from specpair.facts.yaml_data import safe_load

FILE = "engine_lists.yaml"


@dataclass(frozen=True)
class BuiltInLayers:
    """The draft-mode layer count the engine sets for an architecture."""

    unset: int | None
    """the count where the config names none (None: left unset)"""
    configured_3: int | None
    """the count where the config names 3 (3: the engine keeps the config's)"""

    def layers(self, configured: int) -> int | None:
        """The count the engine uses for a config naming `configured` (0: none)."""
        if not configured:
            return self.unset
        return configured if self.configured_3 == 3 else self.configured_3


@dataclass(frozen=True)
class EngineLists:
    hybrid_swa: Mapping[str, str] = field(default_factory=dict)
    extra_buffer: frozenset[str] = frozenset()
    built_in_mtp_layers: Mapping[str, BuiltInLayers] = field(default_factory=dict)
    ssm_dtype_from_config: frozenset[str] = frozenset()


def raw(engine: str) -> dict[str, Any]:
    """The release's file as written (the test compares it with the release)."""
    text = release_text(engine, FILE)
    return dict(safe_load(text) or {}) if text is not None else {}


@cache
def of(engine: str) -> EngineLists:
    """The lists of release `engine` ("sglang 0.5.23"); empty where it has none."""
    data = raw(engine)
    return EngineLists(
        hybrid_swa=dict(data.get("hybrid_swa") or {}),
        extra_buffer=frozenset(data.get("extra_buffer") or ()),
        built_in_mtp_layers={arch: BuiltInLayers(entry["unset"], entry["configured_3"])
                             for arch, entry in (data.get("built_in_mtp_layers")
                                                 or {}).items()},
        ssm_dtype_from_config=frozenset(data.get("ssm_dtype_from_config") or ()))
