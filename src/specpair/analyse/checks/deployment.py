"""Rules about what the deployment asks of the engine release: the method's support,
the context length, and tensor parallelism."""

from __future__ import annotations

from collections.abc import Iterator

from specpair.analyse.checks.gate import Context, rule
from specpair.engines import method_support, verified_layouts
from specpair.model.errors import SpecpairError


@rule("SP308")
def _method_supported(ctx: Context) -> Iterator[tuple[str, str, str]]:
    method = ctx.pair.runbook.speculation.method
    found = method_support.refusal(ctx.pair.engine, method.value,
                                   verified_layouts.layout_architecture(ctx.pair.target.geometry))
    if found is not None:
        yield found[0], "speculation.method", found[1]


@rule("SP401")
def _context(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    length = p.runbook.deployment.context_length
    if p.draft is not None and not p.draft.bundled and \
            p.draft.geometry.max_position_embeddings < length:
        yield (f"draft max positions {p.draft.geometry.max_position_embeddings} < context "
               f"length {length}", "deployment.context_length",
               "measure acceptance on long prompts, or serve a shorter context")


@rule("SP402")
def _positions(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    length = p.runbook.deployment.context_length
    positions = p.target.geometry.max_position_embeddings
    if length > positions:
        yield (f"context length {length:,} exceeds the target's max_position_embeddings "
               f"({positions:,}): {p.engine} refuses to start ('context_length ({length}) "
               f"is greater than the derived context_length ({positions})')",
               "deployment.context_length",
               f"serve at most context_length: {positions}; if the target's rope_scaling "
               "derives a longer context, declare it as "
               "geometry.target.max_position_embeddings")


@rule("SP501")
def _tp(ctx: Context) -> Iterator[tuple[str, str, str]]:
    from specpair.engines.kv_arithmetic import check_tensor_parallel

    try:
        check_tensor_parallel(ctx.pair, ctx.pair.runbook.deployment.parallel.draft_tensor,
                              with_draft=ctx.speculate)
    except SpecpairError as exc:
        for problem in exc.problems:
            yield problem.message, problem.location.field or "deployment.parallel.tensor", \
                problem.hint


@rule("SP502")
def _draft_tp(ctx: Context) -> Iterator[tuple[str, str, str]]:
    par = ctx.pair.runbook.deployment.parallel
    if not ctx.pair.release.profile.draft_tensor_allowed(par.draft_tensor, par.tensor):
        yield (f"draft TP {par.draft_tensor} with target TP {par.tensor}",
               "deployment.parallel.draft_tensor", f"use 1 or {par.tensor}")

