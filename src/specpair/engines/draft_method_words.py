"""What an engine release does with a draft launched under another method than the one it
was trained for, in the engine's own words where the engine checks it (gate rule SP309).

- vLLM 0.32.0-0.34.0 (identical in the three): `EAGLEConfig.__init__`
  (transformers_utils/configs/eagle.py) renames the draft's architecture for methods
  eagle, eagle3 and dflash: `Eagle`, `Eagle3` or `DFlash` in front of a name that does
  not carry that mark yet. A head named for another method gets both marks, a class no
  registry lists, and `_ModelRegistry._raise_for_unsupported`
  (model_executor/models/registry.py) refuses it (tests/engine/test_method_support.py
  asks each release's registry). vLLM 0.34.0 first refuses a draft whose class declares
  another speculator (`_resolve_checkpoint_config_class`,
  v1/worker/gpu/spec_decode/speculator_config.py; `facts.DECLARED_SPECULATOR`).
- SGLang 0.5.23 compares nothing: the draft runner loads the class the draft's config
  names whatever `--speculative-algorithm` says (srt/arg_groups/speculative_hook.py
  `_resolve_speculative_algorithm_alias` reads the draft's architectures only to spot
  Gemma-4 assistant drafts), and an EAGLE-3 head under EAGLE skips its fc layer because
  the hidden states it gets are hidden-sized (srt/models/llama_eagle3.py
  `LlamaForCausalLMEagle3.forward`): it starts and accepts almost nothing.
"""

from __future__ import annotations

from specpair.engines import registry
from specpair.engines.vllm_0_34_0.facts import DECLARED_SPECULATOR
from specpair.model.common import Method

_VLLM_RENAMED = ("0.32.0", "0.33.0", "0.34.0")
_MARKS = ("Eagle3", "Eagle", "DFlash", "DSpark")


def vllm_draft_architecture(method: str, architecture: str) -> str:
    """The architecture vLLM's `EAGLEConfig.__init__` gives the draft for `method`
    (eagle, eagle3, dflash); any other method keeps the config's own."""
    if method == "eagle":
        return architecture if architecture.startswith("Eagle") else f"Eagle{architecture}"
    if method == "eagle3":
        keep = architecture.startswith("Eagle3") or architecture.endswith("Eagle3")
        return architecture if keep else f"Eagle3{architecture}"
    if method == "dflash":
        keep = architecture.startswith("DFlash") or architecture.endswith("DFlash") \
            or architecture == "LiLiCorrDraftModel"
        return architecture if keep else f"DFlash{architecture}"
    return architecture


def two_marks(name: str) -> bool:
    """A renamed architecture that carries two methods' marks (EagleLlamaForCausalLMEagle3,
    Eagle3DFlashDraftModel): no release registers such a class."""
    rest = name
    found = 0
    for mark in _MARKS:
        if mark in rest:
            found += rest.count(mark)
            rest = rest.replace(mark, "")
    return found >= 2


def engine_words(engine: str, requested: Method, architecture: str,
                 trained: frozenset[Method]) -> str:
    """What `engine` (a release label) does when the runbook's method (`requested`) is not
    the one the draft was `trained` for."""
    release = registry.by_label(engine)
    name = release.profile.method_names.get(requested, requested.value)
    if release.name == "vllm" and release.version in _VLLM_RENAMED:
        return _vllm(release.version, name, architecture)
    if engine != "sglang 0.5.23":
        return f"whether {engine} checks it is not in specpair's reviewed data"
    words = (f"{engine} does not compare them: it loads {architecture} under "
             f"--speculative-algorithm {name} (srt/arg_groups/speculative_hook.py "
             "_resolve_speculative_algorithm_alias reads the draft's architectures only for "
             "Gemma-4 assistant drafts)")
    if requested is Method.EAGLE and Method.EAGLE3 in trained:
        words += (", and the EAGLE-3 head, given hidden-sized states, skips its fc layer "
                  "(srt/models/llama_eagle3.py LlamaForCausalLMEagle3.forward): it runs "
                  "with no error and accepts almost nothing")
    return words


def _vllm(version: str, name: str, architecture: str) -> str:
    declared = DECLARED_SPECULATOR.get(architecture) if version == "0.34.0" else None
    if declared is not None and declared != name:
        return (f"vllm {version} refuses it at start-up: \"speculative_config requested "
                f"method={name!r}, but the draft model ... is a {declared!r} checkpoint "
                f"(... architectures=['{architecture}']). Pass a matching method or a "
                "matching draft checkpoint.\" (v1/worker/gpu/spec_decode/"
                "speculator_config.py _resolve_checkpoint_config_class)")
    renamed = vllm_draft_architecture(name, architecture)
    if renamed != architecture and two_marks(renamed):
        return (f"vllm {version} reads the draft as {renamed} for method={name!r} "
                "(transformers_utils/configs/eagle.py EAGLEConfig.__init__) and refuses it "
                f"at start-up: \"Model architectures ['{renamed}'] are not supported for "
                "now.\" (model_executor/models/registry.py _ModelRegistry."
                "_raise_for_unsupported)")
    return (f"vllm {version} does not compare them: it loads the draft as {renamed} for "
            f"method={name!r} (transformers_utils/configs/eagle.py EAGLEConfig.__init__); "
            "nothing there compares the method with the head")
