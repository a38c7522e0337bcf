"""Rules about starting the server: the staging mode, the cold-start budget, and the
engine release's own launch checks."""

from __future__ import annotations

from collections.abc import Iterator

from specpair.analyse.checks.gate import Context, rule
from specpair.analyse.staging import plan
from specpair.analyse.staging_calibration import measured_cold_start


@rule("SP801")
def _staging(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.pair.runbook.staging.mode == "engine-overlap":
        yield ("engine-overlap loading cannot be combined with speculation in "
               f"{ctx.pair.engine}", "staging.mode", "use parallel-prestage or engine-prefetch")


@rule("SP802")
def _cold(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.pair.staging_records:  # a recorded start outranks the model
        yield from measured_cold_start(ctx.pair, ctx.staging or plan(ctx.pair))
        return
    if ctx.staging is not None and not ctx.staging.fits:
        yield ctx.staging.verdict, "staging.cold_start_budget_s", "see staging.md"


@rule("SP901")
def _engine(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for p in ctx.preflight(ctx.speculate):
        if p.severity == "error":
            yield p.message, p.field, p.hint


@rule("SP902")
def _engine_warn(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for p in ctx.preflight(True):
        if p.severity == "warning":
            yield p.message, p.field, p.hint

