"""Rules about the two artifacts and their lock: pinned commits, lock problems and
drift, declared facts, and provenance a resolution could have written."""

from __future__ import annotations

import re
from collections.abc import Iterator

from specpair.analyse.checks.gate import Context, rule
from specpair.engines.pair_input import ResolvedArtifact
from specpair.model.lock import RESOLUTION_MAY_LEAVE_UNREAD

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def runbook_artifacts(ctx: Context) -> Iterator[tuple[str, object]]:
    rb = ctx.pair.runbook
    yield "target", rb.target
    if rb.draft is not None and not rb.draft.bundled:
        yield "draft", rb.draft


@rule("SP101")
def _pinned(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for role, art in runbook_artifacts(ctx):
        repo, revision = getattr(art, "repo", None), getattr(art, "revision", None)
        if repo is not None and not COMMIT.match(revision or ""):
            commit = getattr(getattr(ctx.pair, role).source, "commit", None)
            yield (f"{role} {repo} is pinned to {revision!r}, not a commit",
                   f"{role}.revision",
                   f"pin revision: {commit}" if commit else
                   "run `specpair lock` with hub access and pin the commit it resolves")


@rule("SP102")
def _lock(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for problem in ctx.problems:
        yield problem, "target", "run `specpair lock --refresh`"


@rule("SP103")
def _drift(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for drift in ctx.drift:
        yield drift, "target", "review the new commit, then `specpair lock --refresh`"


@rule("SP104")
def _declared(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for role in ("target", "draft"):
        art = getattr(ctx.pair, role)
        if art is not None and art.unconfirmed:
            yield (f"{role} lock facts are declared and unconfirmed: "
                   + ", ".join(art.unconfirmed), role,
                   "run `specpair lock` against the hub to replace them with resolved facts")
    mapping = ctx.pair.vocab_mapping
    if mapping is not None and mapping.unconfirmed:
        yield ("vocabulary intersection facts are declared and unconfirmed: "
               + ", ".join(mapping.unconfirmed), "speculation.heterogeneous_vocab",
               "run `specpair lock` with both tokenizers at hand to compute them")


def provenance_problems(art: ResolvedArtifact) -> list[str]:
    """What makes a lock section's claimed provenance impossible: facts `specpair lock`
    never writes that way, so the section was written or edited by hand."""
    provenance, source = art.provenance, art.source
    problems = []
    if provenance.startswith("hub@"):
        sha = provenance.removeprefix("hub@")
        if source.repo is None:
            problems.append("claims hub provenance but names no repo")
        if source.commit != sha:
            problems.append(f"claims {provenance} but its source commit is {source.commit}")
        if source.revision and COMMIT.match(source.revision) and source.revision != sha:
            problems.append(f"revision {source.revision[:12]} is a commit, yet it claims to "
                            f"have resolved to {sha[:12]}: a commit resolves to itself")
        unexplained = sorted(set(art.unconfirmed) - RESOLUTION_MAY_LEAVE_UNREAD)
        if unexplained:
            problems.append("claims hub provenance but lists unconfirmed facts a resolution "
                            "reads: " + ", ".join(unexplained))
        for part, claimed in (("weights", art.weights.provenance),
                              ("tokenizer", art.tokenizer.provenance)):
            if claimed != provenance:
                problems.append(f"claims {provenance} but its {part} are {claimed}")
    elif provenance == "declared":
        if source.commit is not None and source.commit != source.revision:
            # a pinned commit is its own commit; a branch's commit only the hub can say
            problems.append(f"is declared yet names commit {source.commit[:12]} for "
                            f"revision {source.revision!r}: only a hub resolution can say "
                            "which commit a revision is")
        if not art.unconfirmed:
            problems.append("is declared but lists no unconfirmed facts: every declared fact "
                            "is unconfirmed until a resolution reads it")
    elif provenance == "local" and source.path is None:
        problems.append("claims local provenance but names no path")
    return problems


@rule("SP105")
def _provenance(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    for role in ("target", "draft"):
        art = getattr(p, role)
        if art is None:
            continue
        for problem in provenance_problems(art):
            yield (f"{role} lock section {problem}", role,
                   "write the lock with `specpair lock` (hub or local folder) or "
                   "`specpair lock --declare`, not by hand")

