"""Launch commands for each supported engine release, as data (argv) before text.

A release's builder (`specpair.engines.<release>.launch`) turns a resolved pair into a
`Launch`: the argv, the environment a node must set (multi-node rank and address), and
pre-flight findings: engine rules that the runbook breaks and that the engine would only
report at start-up, or worse, after the weights have loaded. An error for the runbook's own
engine fails the build.
"""

from __future__ import annotations

from specpair.analyse.schedule import attach
from specpair.engines import registry
from specpair.engines.launch_model import EnvRef, Launch, Preflight, Preflights
from specpair.model.errors import SpecpairError
from specpair.model.findings import Finding
from specpair.resolve.pair import ResolvedPair

__all__ = ["EnvRef", "Launch", "Preflight", "Preflights", "build_for"]


def build_for(pair: ResolvedPair, engine: str | None = None, *,
              speculate: bool = True) -> Launch:
    """The launch of `pair` on `engine` (default: the runbook's); `speculate=False` gives
    the baseline: the same server without a draft, for the measurement protocol. The
    schedule the runbook asks for is resolved first (`schedule.attach`)."""
    release = registry.by_label(engine or pair.engine)
    try:
        scheduled = attach(pair)
    except SpecpairError as exc:  # a derived schedule needs the budget the engine refuses
        launch = release.launch(pair, speculate)
        if speculate:
            first = exc.problems[0]
            launch.preflight.append(Finding(
                "SP901", "error", f"{launch.engine}: the speculation schedule cannot be "
                f"derived: {first.message}", "speculation.schedule", first.hint))
        return launch
    return release.launch(scheduled, speculate)
