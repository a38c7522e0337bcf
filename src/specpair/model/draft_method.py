"""The method a draft checkpoint was trained for, read from the facts its lock holds (the
config's first architecture, its draft keys, whether it lives inside the target).

The engines pick the draft's model class from the architecture its config names, the
method flag only renames it or not at all: vLLM's `EAGLEConfig` prefixes `Eagle`/`Eagle3`/
`DFlash` to an architecture that does not carry the mark yet, SGLang loads the named class
whatever `--speculative-algorithm` says. A head launched under another method than its own
therefore either fails to load or runs with acceptance near nothing, often without an
error (gate rule SP309). What the config does not settle is "unknown" (an empty
`methods`), never a guess: a one-layer plain `LlamaForCausalLM` is an EAGLE head in the
EAGLE authors' configs and an EAGLE-3 head in speculators' research configs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specpair.model.common import Method
from specpair.model.geometry import Geometry

# architecture spellings that name the method (the engines' registries key the draft
# class on them: sglang srt/models/*, vLLM model_executor/models/registry.py
# _SPECULATIVE_DECODING_MODELS)
_EAGLE3 = re.compile(r"^Eagle3[A-Z]|Eagle3$|^Eagle3Speculator$")
_EAGLE = re.compile(r"^Eagle(?!3)[A-Z]\w*ForCausalLM$|ForCausalLMEagle$")
_MTP = re.compile(r"(MTP|MTPModel|NextN)$")
# names of draft kinds the methods above do not cover (P-EAGLE, Domino, ...)
_DRAFT_WORDS = re.compile(r"Draft|Speculator|Eagle|DFlash|DSpark|MTP|NextN|Domino")


def names_a_draft(architecture: str) -> bool:
    """Whether the architecture's name is a draft model's (a draft head, MTP layers, a
    speculator), as the engines' registries spell them."""
    return bool(_DRAFT_WORDS.search(architecture))


@dataclass(frozen=True)
class TrainedMethod:
    methods: frozenset[Method]
    """what the checkpoint carries a trained head for; empty: unknown"""
    evidence: str
    """the config facts it was read from, or why it could not be"""

    @property
    def known(self) -> bool:
        return bool(self.methods)


def _found(evidence: str, *methods: Method) -> TrainedMethod:
    return TrainedMethod(frozenset(methods), evidence)


def classify(draft: Geometry, bundled: bool = False) -> TrainedMethod:
    """The method(s) this draft checkpoint was trained for."""
    if bundled:
        return _bundled(draft)
    arch = draft.architecture
    named = _by_architecture(draft)
    if named is not None:
        return named
    if arch == "unknown" or not arch:
        return _found("its config names no architecture")
    if _DRAFT_WORDS.search(arch):
        return _found(f"architecture {arch} names a draft kind no specpair method runs")
    return _plain(draft)


def _bundled(draft: Geometry) -> TrainedMethod:
    """Layers inside the target checkpoint: MTP layers where the config counts them (after
    the engine's draft mode), DSpark keys where it has them; some carry both."""
    methods = []
    facts = []
    if draft.num_nextn_predict_layers:
        methods.append(Method.MTP)
        facts.append(f"{draft.num_nextn_predict_layers} built-in MTP layer(s)")
    if draft.block_size is not None or draft.target_layer_ids:
        methods.append(Method.DSPARK)
        facts.append("DSpark draft keys")
    if not methods:
        return _found("the target checkpoint's config counts no MTP layers and has no "
                      "DSpark keys")
    return _found(" and ".join(facts) + " in the target checkpoint", *methods)


def _by_architecture(draft: Geometry) -> TrainedMethod | None:
    arch = draft.architecture
    said = f"architecture {arch}"
    if "DSpark" in arch:
        return _found(said, Method.DSPARK)
    if "DFlash" in arch:
        if draft.projector_type == "dspark":
            # SpecForge's earlier DSpark configs: DFlashDraftModel with a DSpark projector
            return _found(f"{said} with dflash_config.projector_type dspark", Method.DSPARK)
        if draft.projector_type not in (None, "domino"):
            return _found(f"{said} with dflash_config.projector_type "
                          f"{draft.projector_type}, which no engine release reads")
        return _found(said, Method.DFLASH)
    if _EAGLE3.search(arch):
        return _found(said, Method.EAGLE3)
    if _EAGLE.search(arch):
        return _found(said, Method.EAGLE)
    if _MTP.search(arch):
        return _found(said, Method.MTP)
    return None


def _plain(draft: Geometry) -> TrainedMethod:
    """A base model's architecture: the draft keys decide, else its depth."""
    arch = draft.architecture
    if draft.block_size is not None or draft.mask_token_id is not None:
        return _found(f"{arch} with block-drafter keys (block size, mask token) but no "
                      "DFlash or DSpark architecture, which would say which")
    if draft.draft_vocab_size is not None:
        return _found(f"{arch} with its own draft vocabulary (draft_vocab_size "
                      f"{draft.draft_vocab_size}), which EAGLE-3 heads are trained with",
                      Method.EAGLE3)
    if draft.target_layer_ids:
        return _found(f"{arch} reading target layers {draft.target_layer_ids} "
                      "(eagle_aux_hidden_state_layer_ids)", Method.EAGLE3)
    if draft.num_hidden_layers == 1:
        return _found(f"a one-layer {arch} without draft keys: EAGLE and EAGLE-3 heads are "
                      "both published under the base architecture, and nothing in the "
                      "config tells them apart")
    return _found(f"a complete {draft.num_hidden_layers}-layer {arch} without draft keys",
                  Method.STANDALONE)
