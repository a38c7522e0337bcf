"""Rules about the memory budget: whether the pair fits, the draft's share of the KV
cache, and KV layouts the oracle has not verified."""

from __future__ import annotations

from collections.abc import Iterator

from specpair.analyse.checks.gate import Context, rule
from specpair.engines import verified_layouts
from specpair.model.common import Method


@rule("SP601")
def _fits(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.budget is None:
        return
    scenario = ctx.budget.speculative if ctx.speculate else ctx.budget.baseline
    if scenario is not None and not scenario.fits:
        yield scenario.verdict, "deployment.memory_fraction", "see budget.md"


@rule("SP602")
def _share(ctx: Context) -> Iterator[tuple[str, str, str]]:
    b = ctx.budget
    if b is not None and b.speculative is not None and b.speculative.cell_draft:
        yield (f"the draft holds {b.draft_share_of_kv_pct}% of every token's KV bytes and "
               f"costs {b.capacity_lost_pct}% of the token capacity", "deployment", "")


@rule("SP603")
def _verified(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for note in ctx.budget.unverified if ctx.budget else []:
        yield (note, "deployment.assumptions.unverified_layouts",
               "run `specpair verify --record` (the release's own code confirms the "
               "budget or gives its figures), add the architecture to the KV oracle corpus "
               "(its release's verified_layouts.yaml), or waive SP603 with the reason the "
               "budget is trusted")


@rule("SP605")
def _engine_differs(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for note in ctx.budget.engine_differs if ctx.budget else []:
        yield (f"the release's own code differs: {note}", "deployment",
               "use the engine's figure (size the deployment from it), and report the "
               "difference to specpair; `specpair verify` shows both")


@rule("SP604")
def _refused_layout(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.budget is None:
        models = [("target", ctx.pair.target.geometry)]
        if ctx.pair.draft is not None and ctx.pair.runbook.speculation.method is not \
                Method.NGRAM:
            models.append(("draft", ctx.pair.draft.geometry))
        refused, _ = verified_layouts.check(ctx.pair.engine, models,
                                    ctx.pair.runbook.deployment.assumptions.unverified_layouts)
        for u in refused:
            yield u.message + " (no budget computed)", \
                "deployment.assumptions.unverified_layouts", u.hint

