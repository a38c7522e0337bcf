"""Which target architectures an engine release can run a method on (each release's own
`method_support.yaml`).

EAGLE-3 drafts read auxiliary hidden states from the target, so the target's model class
must expose them: vLLM 0.33.0 checks its `SupportsEagle3` interface when the model loads,
SGLang 0.5.23 calls the class's `set_eagle3_layers_to_capture`. Without it the engine
refuses the pair only after both checkpoints are loaded. Each file holds every
architecture the release's model registry lists, written from the registry by
tools/method_support.py; tests/engine/test_method_support.py fails when the engine and a
file disagree. The gate reads the files, so it needs no engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from specpair.engines import registry
from specpair.facts import yaml_data


@dataclass(frozen=True)
class MethodSupport:
    reason: str
    """the engine's own error, `{architecture}` standing for the target's class"""
    where: str
    supported: frozenset[str]
    unsupported: frozenset[str]


@cache
def support() -> dict[str, dict[str, MethodSupport]]:
    """engine label → method → what the engine's registry says."""
    found = {}
    for label in registry.labels():
        text = registry.release_file(label, "method_support.yaml")
        methods = yaml_data.safe_load(text) if text is not None else {}
        found[label] = {method: MethodSupport(entry["reason"], entry["where"],
                                              frozenset(entry["supported"]),
                                              frozenset(entry["unsupported"]))
                        for method, entry in methods.items()}
    return found


def refusal(engine: str, method: str, architecture: str) -> tuple[str, str] | None:
    """(message, hint) when `engine` cannot run `method` on this target architecture."""
    entry = support().get(engine, {}).get(method)
    if entry is None or architecture in entry.supported:
        return None
    if architecture in entry.unsupported:
        return (f"{engine} cannot run {method} on {architecture}: "
                f"\"{entry.reason.format(architecture=architecture)}\" ({entry.where})",
                f"use a method the target's model class supports, or a target whose class "
                f"{engine.split()[0]} can capture auxiliary hidden states from")
    return (f"{engine}'s model registry does not list {architecture}, so it cannot run "
            f"{method} on it (the release's method_support.yaml holds every architecture "
            "the registry lists)",
            "check `architectures` in the target's config.json against the release's "
            "registry (an architecture whose class needs a plugin package is not listed: "
            "tools/method_support.py)")
