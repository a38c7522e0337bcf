"""EAGLE-3 support per target architecture, asked of the engines' own model registries:
each release's method_support.yaml must hold what the engine says for every architecture its
registry lists, and the gate must refuse exactly the pairs the engine cannot load, with the
engine's reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specpair.analyse.checks.gate import Context, run
from specpair.engines import method_support
from tests.engine import releases, workers
from tests.support.geometries import dense
from tests.support.pairs import make_pair

ENGINES = (*releases.SGLANG, *releases.VLLM)  # the releases with a package


def engine_answers(engine: str, architectures: list[str] | None) -> dict[str, bool | None]:
    """The release's answer per architecture (None: not registered, or its class does not
    import here); every architecture its registry lists without `architectures`."""
    request = {} if architectures is None else {"architectures": architectures}
    answers: dict[str, bool | None] = probe(engine, request)
    return answers


def probe(engine: str, request: dict[str, Any]) -> Any:
    """eagle3_support.py's answer to `request`, in the release's harness process
    (tests/engine/workers.py)."""
    return workers.call("eagle3_support", engine.split()[0], releases.env(engine), request,
                        timeout=1200)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_eagle3_support_is_the_engines_whole_registry(engine: str) -> None:
    entry = method_support.support()[engine]["EAGLE3"]
    answers = engine_answers(engine, None)
    supported = {a for a, ok in answers.items() if ok}
    unsupported = {a for a, ok in answers.items() if ok is False}
    assert len(answers) > 200  # the whole registry, not a reviewed few
    assert entry.supported == supported, sorted(entry.supported ^ supported)
    assert entry.unsupported == unsupported, sorted(entry.unsupported ^ unsupported)
    # every answer through the refusal the gate makes, quoting the engine where it cannot
    for architecture, ok in answers.items():
        refused = method_support.refusal(engine, "EAGLE3", architecture)
        if ok:
            assert refused is None, architecture
        else:
            assert refused is not None, architecture
            if ok is False:
                assert entry.reason.format(architecture=architecture) in refused[0]
    # and the whole gate, on one of each: runs, refused with the engine's words, unlisted
    name, version = engine.split()
    for architecture in (min(supported), min(unsupported), "NoSuchModelForCausalLM"):
        target = dense(36).model_copy(update={"architecture": architecture})
        pair = make_pair(target, dense(1), engine=name, version=version,
                         speculation={"method": "EAGLE3", "num_speculative_tokens": 3})
        found = [f for f in run(Context(pair)) if f.rule == "SP308"]
        if architecture in supported:
            assert not found, (architecture, found)
        elif architecture in unsupported:
            assert len(found) == 1 and entry.reason.format(
                architecture=architecture) in found[0].message, (architecture, found)
        else:
            assert len(found) == 1 and "registry does not list" in found[0].message, found


def test_the_declared_speculators_are_vllm_0_34_0s() -> None:
    """engines/vllm_0_34_0/facts.py DECLARED_SPECULATOR (the launch's method check) is what
    0.34.0's registry declares for each draft architecture, every one of them."""
    from specpair.engines.vllm_0_34_0.facts import DECLARED_SPECULATOR

    assert probe("vllm 0.34.0", {"declared": True}) == DECLARED_SPECULATOR


def _corpus_draft_architectures() -> dict[str, str]:
    """folder → architecture of every corpus draft whose method the config names."""
    from specpair.model.config_geometry import from_hf_config
    from specpair.model.draft_method import classify
    from tests.support.paths import FIXTURES

    found = {}
    for entry in json.loads((FIXTURES / "corpus" / "SOURCES.json").read_text()):
        if entry["role"] != "draft":
            continue
        config = json.loads((FIXTURES / "corpus" / entry["folder"] / "config.json").read_text())
        try:
            geometry = from_hf_config(config, as_draft=True)
        except ValueError:
            continue
        if classify(geometry).known:
            found[entry["folder"]] = geometry.architecture
    return found


@pytest.mark.parametrize("engine", sorted(releases.VLLM))
def test_vllm_refuses_the_renamed_heads_sp309_says_it_refuses(engine: str) -> None:
    """SP309 quotes `_raise_for_unsupported` where EAGLEConfig gives a head a second method's
    mark: each such name, for every corpus draft under every other method, is one the
    release's registry does not list; under its own method the name is kept or listed."""
    from specpair.engines.draft_method_words import two_marks, vllm_draft_architecture

    architectures = _corpus_draft_architectures()
    renamed = {(folder, method): vllm_draft_architecture(method, arch)
               for folder, arch in architectures.items()
               for method in ("eagle", "eagle3", "dflash")}
    refused = sorted({name for (folder, _), name in renamed.items()
                      if name != architectures[folder] and two_marks(name)})
    assert "EagleLlamaForCausalLMEagle3" in refused and "Eagle3DFlashDraftModel" in refused
    listed = probe(engine, {"registered": True, "architectures": refused})
    assert not [name for name in refused if listed[name]], listed
