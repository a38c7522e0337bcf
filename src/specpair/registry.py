"""The allowlist of verified KV layouts, per engine release (data/verified_layouts.yaml).

A budget is computed only for architectures whose layer-layout mapping the KV oracle has
checked against that engine release's own pool-sizing code. Any other architecture is
refused by name, with what would make it supported; a runbook may still budget it by
declaring it in `deployment.assumptions.unverified_layouts`, and then the budget carries
the declaration (`Budget.unverified`) so that every output says so and the gate fails
unless the finding is waived. Never a silent number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from specpair.geometry import Geometry


@cache
def verified() -> dict[str, dict[str, tuple[str, ...]]]:
    """engine label → architecture → the corpus configs that verify it."""
    text = resources.files("specpair").joinpath("data/verified_layouts.yaml").read_text(
        encoding="utf-8")
    data = yaml.safe_load(text)
    return {engine: {arch: tuple(configs) for arch, configs in entries.items()}
            for engine, entries in data.items()}


def layout_architecture(g: Geometry) -> str:
    """The architecture whose layout decides the cache. A bundled draft (its lock names
    it "<target architecture> (built-in MTP layers)" or "(MTP layer)") is the target's
    own MTP/NEXTN layers: "<target architecture> MTP layers"."""
    head, _, tail = g.architecture.partition(" (")
    return f"{head} MTP layers" if tail.startswith(("built-in MTP", "MTP layer")) else head


@dataclass(frozen=True)
class Unverified:
    role: str
    architecture: str
    engine: str

    @property
    def message(self) -> str:
        return (f"the {self.role}'s KV layout ({self.architecture}) is not verified for "
                f"{self.engine}: no corpus config of it is checked against the engine's own "
                "pool-sizing code")

    @property
    def hint(self) -> str:
        return ("add a real config.json of this architecture to the KV oracle corpus and "
                "to data/verified_layouts.yaml once every case is exact, or declare it in "
                f"deployment.assumptions.unverified_layouts: [{self.architecture}] to "
                "budget it unverified (the gate's SP603 then fails unless waived)")


def unverified(engine: str, models: list[tuple[str, Geometry]]) -> list[Unverified]:
    """The models (role, geometry) whose layout `engine` has no verified entry for."""
    entries = verified().get(engine, {})
    return [Unverified(role, layout_architecture(g), engine) for role, g in models
            if layout_architecture(g) not in entries]


def check(engine: str, models: list[tuple[str, Geometry]], declared: list[str]
          ) -> tuple[list[Unverified], list[str]]:
    """(unverified layouts the runbook does not declare: refused; the declared ones' notes,
    with which every output marks the budget unverified)."""
    missing = unverified(engine, models)
    refused = [u for u in missing if u.architecture not in declared]
    notes = [f"{u.message}; declared in deployment.assumptions."
             "unverified_layouts" for u in missing if u.architecture in declared]
    return refused, notes
