"""An engine upgrade as a reviewed change: what moving a pair from one supported release to
another changes, read from the two releases' own packages.

Nothing here knows a release: it compares what each release resolves for the pair (its
server arguments keyed by meaning, so a renamed flag is one argument spelled two ways),
its method spellings, the gate rules that apply to it (catalogue `requires` against the
release's capabilities), and the budget each computes. A release the runbook pins but
specpair does not support never gets here: the loader refuses it, naming the supported
ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from specpair.analyse.budget import compute
from specpair.engines.args_model import ServerArg
from specpair.model.catalogue import CATALOGUE
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair

REMEASURE = ("Re-measure acceptance with the measurement protocol (`specpair bench`): a new "
             "release can change τ (drafting, verification and sampling code change between "
             "releases), so the recorded τ and the SLO's break-even no longer carry over")


@dataclass(frozen=True)
class ArgChange:
    key: str
    label: str
    kind: str  # renamed | removed | added | default | value
    before: ServerArg | None
    after: ServerArg | None

    def describe(self, base: str, head: str) -> str:
        b, a = self.before, self.after
        if self.kind == "removed":
            assert b is not None
            return f"{b.flag} ({self.label}) is gone in {head}: it was {b.value}"
        if self.kind == "added":
            assert a is not None
            return f"{a.flag} ({self.label}) is new in {head}: {a.value}" + \
                (" (the release's default)" if a.default else "")
        assert b is not None and a is not None
        parts = []
        if self.kind == "renamed" or b.flag != a.flag:
            parts.append(f"flag renamed {b.flag} → {a.flag}")
        if b.value != a.value:
            which = "default" if b.default and a.default else "value"
            parts.append(f"{which} {b.value} → {a.value}")
        if self.kind == "default":
            if b.value == a.value:
                parts.append(f"default {b.value} in both")
            if b.how != a.how:
                parts.append(f"{base}: {b.how or 'its default'}; {head}: "
                             f"{a.how or 'its default'}")
        return f"{b.flag} ({self.label}): " + ", ".join(parts) if self.kind == "default" \
            else f"{self.label}: " + ", ".join(parts)


def _rows(pair: ResolvedPair) -> dict[str, ServerArg]:
    return {row.key: row for row in pair.release.server_args(pair, pair.gpu_spec).rows()}


def arg_changes(base: ResolvedPair, head: ResolvedPair) -> list[ArgChange]:
    """The server arguments that differ between the two pairs' releases, by meaning."""
    before, after = _rows(base), _rows(head)
    changes = []
    for key in [*before, *(k for k in after if k not in before)]:
        b, a = before.get(key), after.get(key)
        label = (b or a).label if (b or a) else key  # type: ignore[union-attr]
        if a is None:
            changes.append(ArgChange(key, label, "removed", b, None))
        elif b is None:
            changes.append(ArgChange(key, label, "added", None, a))
        elif b.flag != a.flag:
            changes.append(ArgChange(key, label, "renamed", b, a))
        elif b.value != a.value:
            changes.append(ArgChange(key, label, "default" if b.default and a.default
                                     else "value", b, a))
        elif b.default and a.default and b.how != a.how:
            # the same value reached another way (a parser default against a value resolved
            # later): a later change of either release's resolution moves one of them
            changes.append(ArgChange(key, label, "default", b, a))
    return changes


def rule_changes(base: ResolvedPair, head: ResolvedPair) -> tuple[list[str], list[str]]:
    """(rules that now apply, rules that no longer apply) to the pair."""
    was, now = base.release.profile.capabilities, head.release.profile.capabilities
    gained = [f"{r.id} {r.title}" for r in CATALOGUE if r.applies_to(now)
              and not r.applies_to(was)]
    lost = [f"{r.id} {r.title}" for r in CATALOGUE if r.applies_to(was)
            and not r.applies_to(now)]
    return gained, lost


def _numbers(pair: ResolvedPair) -> tuple[str, int, bool, str] | str:
    """(capacity as printed, running requests, fits, full-context sequences as printed);
    a capacity the engine measures at start-up is printed as the estimate it is."""
    try:
        budget = compute(pair)
    except SpecpairError as exc:
        return exc.problems[0].message
    s = budget.speculative or budget.baseline
    if s.capacity_estimate is None:
        return f"{s.max_total_tokens:,}", s.max_running_requests, s.fits, \
            f"{s.sequences_at_context:,}"
    return (f"≈ {s.max_total_tokens:,} (estimate, {s.capacity_estimate})",
            s.max_running_requests, s.fits, f"≈ {s.sequences_at_context:,} (estimate)")


def _default_effect(change: ArgChange, base: ResolvedPair, head: ResolvedPair) -> str:
    """What a changed default does to the budget: each release's budget reads its own
    resolved value, so equal values leave the budget to the other changes."""
    b, h = _numbers(base), _numbers(head)
    if isinstance(b, str) or isinstance(h, str):
        return f"budget before: {b}; after: {h}"
    capacity = f"KV token capacity {b[0]} → {h[0]}"
    assert change.before is not None and change.after is not None
    if change.before.value == change.after.value:
        return (f"effect on the budget: none, both budgets run with {change.after.value} "
                f"({capacity})")
    return f"effect on the budget, with this upgrade's other changes: {capacity}"


def _budget_line(base: ResolvedPair, head: ResolvedPair) -> str:
    b, h = _numbers(base), _numbers(head)
    if isinstance(b, str) or isinstance(h, str):
        return f"budget before: {b}; after: {h}"
    fits = ["fits" if side[2] else "does not fit" for side in (b, h)]  # words, not bools
    return (f"budget: KV token capacity {b[0]} → {h[0]}, full-context sequences "
            f"{b[3]} → {h[3]}, max running requests {b[1]:,} → {h[1]:,}, {fits[0]} → "
            f"{fits[1]}")


def upgrade_items(base: ResolvedPair, head: ResolvedPair) -> list[str]:
    """The checklist of a pair whose engine release changed (empty when it did not)."""
    if base.engine == head.engine:
        return []
    was, now = base.release.profile.title, head.release.profile.title
    refusals = _refusals(head)
    items = [f"Engine release {was} → {now}: this pair cannot move: {r}" for r in refusals]
    items += [f"Engine release {was} → {now}: {c.describe(was, now)}"
             + (f"; {_default_effect(c, base, head)}" if c.kind == "default" else "")
             for c in arg_changes(base, head)]
    method = head.runbook.speculation.method
    spelled = (base.release.profile.method_names.get(method),
               head.release.profile.method_names.get(method))
    if spelled[0] != spelled[1]:
        items.append(f"Engine release {was} → {now}: method {method.value} is spelled "
                     f"{spelled[0]} → {spelled[1]}")
    gained, lost = rule_changes(base, head)
    if gained:
        items.append(f"Engine release {was} → {now}: gate rules that now apply: "
                     + "; ".join(gained))
    if lost:
        items.append(f"Engine release {was} → {now}: gate rules that no longer apply: "
                     + "; ".join(lost))
    items += _command_changes(base, head, f"Engine release {was} → {now}: ")
    items += _reviewed(base, head, f"Engine release {was} → {now}: ")
    items.append(f"Engine release {was} → {now}: {_budget_line(base, head)}")
    items.append(REMEASURE)
    if not refusals:
        items += [RESTAGE.format(image=head.release.image), REAPPLY]
    return items


RESTAGE = ("Re-stage with the new release's image ({image}): run the generated "
           "stage-and-launch.sh and record the cold start (`specpair staging ingest`); its "
           "start-up log also gives the engine's own KV capacity")
REAPPLY = ("Re-apply the manifest (deployment.k8s.yaml): its image and server command "
           "change with the release")


def _refusals(pair: ResolvedPair) -> list[str]:
    """The new release's own refusals of the pair's command, with what to do instead."""
    try:
        launch = pair.release.launch(pair, True)
    except SpecpairError as exc:
        return [p.message for p in exc.problems]
    return [f"{p.message} ({p.field}; {p.hint})" for p in launch.errors]


def _flags(pair: ResolvedPair) -> tuple[dict[str, str], dict[str, object]] | None:
    """The command's flags (flag → value, '' for a switch) and its JSON config's keys."""
    try:
        argv = [str(a) for a in pair.release.launch(pair, True).argv]
    except SpecpairError:
        return None
    flags: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") \
                else ""
            flags[arg] = value
    keys: dict[str, object] = {}
    for flag, value in flags.items():
        if value.startswith("{"):
            keys.update({f"{flag} {k}": v for k, v in json.loads(value).items()})
            flags[flag] = "{…}"
    return flags, keys


def _command_changes(base: ResolvedPair, head: ResolvedPair, prefix: str) -> list[str]:
    """Each flag and config key of the pair's command that the move removes, adds or
    changes; where none does, what was compared."""
    b, h = _flags(base), _flags(head)
    if b is None or h is None:
        return []
    items = []
    for before, after, what in ((b[0], h[0], "flag"), (b[1], h[1], "key")):
        for name in sorted(before.keys() | after.keys()):
            if name not in after:
                items.append(f"{prefix}{what} {name} removed (was {before[name]!s})")
            elif name not in before:
                items.append(f"{prefix}{what} {name} added ({after[name]!s})")
            elif before[name] != after[name]:
                items.append(f"{prefix}{what} {name} {before[name]!s} → {after[name]!s}")
    flags = len(b[0].keys() | h[0].keys())
    keys = len(b[1].keys() | h[1].keys())
    items.append(f"{prefix}{flags} flags and {keys} config keys of the pair's command "
                 f"compared, {len(items) or 'none'} changed")
    return items


def _reviewed(base: ResolvedPair, head: ResolvedPair, prefix: str) -> list[str]:
    """The reviewed differences between the two releases (a release package's
    facts.DIFFERENCES, read in both releases' code), each with what it changes."""
    if head.release.compared_with == base.engine:
        facts, forward = head.release.differences, True
    elif base.release.compared_with == head.engine:
        facts, forward = base.release.differences, False
    else:
        return [f"{prefix}no reviewed differences are recorded between these releases: "
                "read both releases' code before relying on this checklist"]
    items = []
    for fact in facts:
        was, now = (fact.there, fact.here) if forward else (fact.here, fact.there)
        items.append(f"{prefix}reviewed difference ({fact.kind}) {fact.subject}: {was} → "
                     f"{now}; for a pair: {fact.effect} ({fact.source})")
    items.append(f"{prefix}{len(facts)} reviewed differences listed "
                 f"({sum(f.kind == 'default' for f in facts)} defaults, "
                 f"{sum(f.kind == 'flag' for f in facts)} flags and keys)")
    return items
