"""`specpair verify`: a pair's KV sizing put to its pinned release's own code.

The release's probe (`EngineRelease.kv_probe`) turns the pair and its budget into the
one case the release's engine-side script reads, and the figures specpair's port gives
for it; the engine's answer decides. Every figure is shown with both values: where they
agree the budget is confirmed by the release's code, where they differ the engine's
figure is the one to use and the difference is the finding. A layout specpair's allowlist
refuses is still put to the engine (that is what verify is for): its budget is computed
by the release's rules alone and said to be refused by specpair."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from specpair.analyse.analysis import Analysis
from specpair.analyse.budget import check_layouts
from specpair.analyse.engine_verdict import ask, local_pair, question
from specpair.analyse.schedule import resolve_by_release
from specpair.engines.kv_arithmetic import check_tensor_parallel
from specpair.engines.kv_probe import KvProbe
from specpair.engines.method_support import refusal, support
from specpair.model.budget import Budget
from specpair.model.common import Strict
from specpair.model.errors import SpecpairError
from specpair.model.lock import EngineVerdict
from specpair.resolve.pair import ResolvedPair


class Figure(Strict):
    key: str
    label: str
    ours: Any
    engine: Any

    @property
    def agrees(self) -> bool:
        return bool(self.ours == self.engine)


class Verification(Strict):
    pair: str
    source_file: str = Field(description="the pair's runbook, as the loader named it")
    release: str
    environment: str
    asked: dict[str, Any] = Field(description="the case the release's script was given")
    question: str = Field(description="sha256 of the question, folders by role")
    figures: list[Figure]
    notes: list[str] = Field(default_factory=list)
    refused_by_specpair: str | None = Field(
        default=None, description="why specpair's allowlist refuses the layout, if it does")
    engine_error: str | None = Field(default=None,
                                     description="the engine's own error for the case")
    method_support: str | None = None

    @property
    def confirmed(self) -> bool:
        return self.engine_error is None and all(f.agrees for f in self.figures)

    @property
    def differences(self) -> list[Figure]:
        return [f for f in self.figures if not f.agrees]


def budget_of(pair: ResolvedPair) -> tuple[ResolvedPair, Budget, str | None]:
    """(the pair as the build analyses it, its budget, specpair's allowlist refusal or
    None): a refused layout is budgeted by the release's rules alone."""
    try:
        check_layouts(pair)
    except SpecpairError as refused:
        check_tensor_parallel(pair, pair.runbook.deployment.parallel.draft_tensor)
        reason = "; ".join(p.message for p in refused.problems)
        return (*resolve_by_release(pair), reason)
    analysis = Analysis(pair)
    return analysis.pair, analysis.budget, None


class Asked(Strict):
    probe: KvProbe = Field(description="the case with the machine's config folders")
    question: str = Field(description="its question, folders by role (`engine_verdict`)")
    refused: str | None = Field(description="specpair's allowlist refusal, or None")


def probe(pair: ResolvedPair, folders: dict[str, Path]) -> Asked:
    """The release's question for the pair, and specpair's own refusal of it (or None)."""
    if pair.release.kv_probe is None:
        raise SpecpairError.single(pair.source_file, f"{pair.engine} has no KV probe: "
                                   "specpair cannot ask its code", "verify on a release "
                                   "that has one")
    analysed, budget, refused = budget_of(pair)
    # raises the release's own refusal (nothing left to size, a multi-node command)
    probe = pair.release.kv_probe(local_pair(analysed, folders), budget)
    by_role = ask(analysed, budget)
    assert by_role is not None  # the same probe, which just answered
    return Asked(probe=probe, question=question(by_role), refused=refused)


def method_support(pair: ResolvedPair) -> str | None:
    """What the release's model registry says of the pair's method on its target
    architecture (the release's method_support.yaml, tested equal to the registry), in
    the words of the gate's rule; None for a method the registry does not decide."""
    method = pair.runbook.speculation.method.value
    if support().get(pair.engine, {}).get(method) is None:
        return None
    arch = pair.target.geometry.architecture
    found = refusal(pair.engine, method, arch)
    return f"{method} on {arch}: {pair.engine}'s model registry supports it" \
        if found is None else found[0]


def judge(pair: ResolvedPair, asked: Asked, answer: dict[str, Any], environment: str
          ) -> Verification:
    """The engine's answer beside specpair's figures."""
    probe = asked.probe
    error = None if answer.get("ok") else str(answer.get("error", "no answer"))[:600]
    figures = [] if error else [Figure(key=k, label=probe.labels.get(k, k), ours=v,
                                       engine=answer.get(k)) for k, v in probe.expected.items()]
    return Verification(pair=pair.name, source_file=pair.source_file,
                        release=probe.release, environment=environment,
                        asked=probe.case, question=asked.question, figures=figures,
                        notes=probe.notes, refused_by_specpair=asked.refused,
                        engine_error=error, method_support=method_support(pair))


def as_verdict(v: Verification) -> EngineVerdict:
    """What the lock records of a verification the engine answered."""
    assert v.engine_error is None
    return EngineVerdict(release=v.release, provenance=f"engine {v.release}",
                         question=v.question, figures={f.key: f.engine for f in v.figures},
                         specpair={f.key: f.ours for f in v.figures},
                         labels={f.key: f.label for f in v.figures})
