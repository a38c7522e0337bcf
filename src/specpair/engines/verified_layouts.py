"""The allowlist of verified KV layouts, per engine release (each release's own
`verified_layouts.yaml`).

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

from specpair.engines import engine_lists, registry
from specpair.engines.pair_input import EngineInput
from specpair.facts import yaml_data
from specpair.model.common import Method
from specpair.model.geometry import Geometry
from specpair.model.memo import value_memo


@cache
def verified() -> dict[str, dict[str, tuple[str, ...]]]:
    """engine label → architecture → the corpus configs that verify it."""
    found = {}
    for label in registry.labels():
        text = registry.release_file(label, "verified_layouts.yaml")
        entries = yaml_data.safe_load(text) if text is not None else {}
        found[label] = {arch: tuple(configs) for arch, configs in entries.items()}
    return found


def layout_architecture(g: Geometry) -> str:
    """The architecture whose layout decides the cache. A bundled draft (its lock names
    it "<target architecture> (built-in MTP layers)" or "(MTP layer)") is the target's
    own MTP/NEXTN layers: "<target architecture> MTP layers"."""
    return _layout(g.architecture)


@value_memo  # of the architecture's name alone; every budget of a plan checks its models
def _layout(architecture: str) -> str:
    head, _, tail = architecture.partition(" (")
    return f"{head} MTP layers" if tail.startswith(("built-in MTP", "MTP layer")) else head


@dataclass(frozen=True)
class Unverified:
    role: str
    architecture: str
    engine: str
    because: str | None = None
    """The release's own lists (`engine_lists`) say it sizes this layout otherwise than
    specpair's port reads the config: refused whatever the runbook declares."""

    @property
    def message(self) -> str:
        if self.because:
            return (f"the {self.role}'s KV layout ({self.architecture}) cannot be budgeted "
                    f"for {self.engine}: {self.because}")
        return (f"the {self.role}'s KV layout ({self.architecture}) is not verified for "
                f"{self.engine}: no corpus config of it is checked against the engine's own "
                "pool-sizing code")

    @property
    def hint(self) -> str:
        if self.because:
            return ("run `specpair verify` on this pair: the release's own code sizes it "
                    "(declaring it in deployment.assumptions.unverified_layouts would print "
                    "a number known to be wrong, so it does not budget it)")
        return ("add a real config.json of this architecture to the KV oracle corpus and "
                "to its release's verified_layouts.yaml once every case is exact, or declare it in "
                f"deployment.assumptions.unverified_layouts: [{self.architecture}] to "
                "budget it unverified (the gate's SP603 then fails unless waived), then "
                "`specpair verify --record` to have the release's own code confirm it")


def unverified(engine: str, models: list[tuple[str, Geometry]]) -> list[Unverified]:
    """The models (role, geometry) whose layout `engine` has no verified entry for."""
    entries = verified().get(engine, {})
    return [Unverified(role, layout_architecture(g), engine) for role, g in models
            if layout_architecture(g) not in entries]


def check(engine: str, models: list[tuple[str, Geometry]], declared: list[str]
          ) -> tuple[list[Unverified], list[str]]:
    """(unverified layouts the runbook does not declare: refused; the declared ones' notes,
    with which every output marks the budget unverified)."""
    refused, notes = _check(engine, tuple(models), tuple(declared))
    return list(refused), list(notes)


@value_memo  # of the engine, the models (role, geometry) and the declared layouts: every
# budget of a plan checks the same ones
def _check(engine: str, models: tuple[tuple[str, Geometry], ...], declared: tuple[str, ...]
           ) -> tuple[tuple[Unverified, ...], tuple[str, ...]]:
    missing = unverified(engine, list(models))
    verified_here = verified().get(engine, {})
    # a geometry whose model type the lock does not hold (declared by hand, or locked
    # before specpair read it) is judged by its architecture where the oracle verified it
    read_otherwise = tuple(Unverified(role, layout_architecture(g), engine, because)
                           for role, g in models
                           if (because := engine_lists.refused_attention(engine, g))
                           and not (g.model_type is None
                                    and layout_architecture(g) in verified_here))
    return (read_otherwise + tuple(u for u in missing if u.architecture not in declared
                                   and u.role not in {r.role for r in read_otherwise}),
            tuple(f"{u.message}; declared in deployment.assumptions."
                  "unverified_layouts" for u in missing if u.architecture in declared))


def pair_models(pair: EngineInput) -> list[tuple[str, Geometry]]:
    """The models whose KV the pair's budget holds: the target, and the draft unless the
    method keeps no draft pool (NGRAM)."""
    models = [("target", pair.target.geometry)]
    if pair.draft is not None and pair.runbook.speculation.method is not Method.NGRAM:
        models.append(("draft", pair.draft.geometry))
    return models


UNVERIFIED_MARK = "Unverified budget"
"""The words every output that carries a budget-derived number starts its note with."""
DIFFERS_MARK = "Differs from the engine's code"
DIFFERS_MEANING = ("The pinned release's own KV sizing (`specpair verify`, recorded in the "
                   "lock) gives another figure for this pair: use the engine's, and report "
                   "the difference to specpair.")


def confirmed_text(provenance: str) -> str:
    """The line every output carries for a budget the release's own code confirmed. What
    the engine measures at start-up (the GPU's free memory) stays the budget's."""
    release = provenance.removeprefix("engine ")
    return (f"Confirmed by {release}'s code: its own KV sizing gives these pools for the KV "
            "bytes this budget assumes (`specpair verify --record`, in the lock); the bytes "
            "themselves follow the budget's assumptions")


def declared_notes(pair: EngineInput) -> list[str]:
    """The pair's declared unverified layouts, as the notes every output shows; refusals
    of undeclared ones are the budget's (specpair.analyse.budget.check_layouts)."""
    return check(pair.engine, pair_models(pair),
                 pair.runbook.deployment.assumptions.unverified_layouts)[1]


def marks(pair: EngineInput) -> list[str]:
    """One line per declared unverified layout, for a comment or a page: the mark, the
    note, and what it means for the numbers."""
    return [mark(note) for note in declared_notes(pair)]


UNVERIFIED_MEANING = ("The numbers follow the engine's rules but neither specpair's KV oracle "
                      "nor the release's own code checked this layout (`specpair verify "
                      "--record` asks the release); the gate's SP603 fails unless waived.")


def mark(note: str) -> str:
    """A declared layout's note as text outputs show it (JSON outputs carry the bare notes
    under `unverified`)."""
    return f"{UNVERIFIED_MARK}: {note}. {UNVERIFIED_MEANING}"


README_BEGIN = "<!-- architectures: generated from the releases' verified_layouts.yaml -->"
README_END = "<!-- /architectures -->"


def architectures_markdown() -> str:
    """The README's table: per architecture, whether each engine release budgets it
    (verified by the KV oracle) and runs EAGLE-3 on it; then the layout keys refused by
    name. Generated from the registries, so it cannot drift from what specpair does."""
    from specpair.engines.method_support import support
    from specpair.model.config_geometry import EVERY_LAYER_WINDOW, UNMODELLED_LAYOUT_KEYS
    from specpair.model.draft_method import names_a_draft

    engines = sorted(verified())
    archs = sorted({a for e in engines for a in verified()[e]})
    head = ["Architecture", *[f"{e}: budget" for e in engines],
            *[f"{e}: EAGLE-3 target" for e in engines]]
    rows = []
    for arch in archs:
        cells = ["verified" if arch in verified()[e] else "refused (not verified)"
                 for e in engines]
        for e in engines:
            entry = support().get(e, {}).get("EAGLE3")
            # a draft's own class is no EAGLE-3 target, whatever its interface says
            cells.append("—" if entry is None or names_a_draft(arch)
                         or arch not in entry.supported | entry.unsupported
                         else "yes" if arch in entry.supported else "no (engine refuses)")
        rows.append([f"`{arch}`", *cells])
    lines = [README_BEGIN, "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
             *("| " + " | ".join(r) + " |" for r in rows), "",
             "Any other architecture is refused by name (declare it in "
             "`deployment.assumptions.unverified_layouts` to budget it unverified; SP603 "
             "fails until waived, or `specpair verify --record` confirms it with the "
             "release's own code). Config keys that change the layout and that the mapping "
             "does not read are refused at lock, by key:", "",
             "| Key | Why |", "|---|---|",
             *(f"| `{k}` | {why} |" for k, why in UNMODELLED_LAYOUT_KEYS.items()),
             f"| `sliding_window` | {EVERY_LAYER_WINDOW} |",
             "", README_END]
    return "\n".join(lines) + "\n"
