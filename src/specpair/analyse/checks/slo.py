"""Rules about the acceptance SLO: the break-even at the serving concurrency, what the
latency model does not cover, and the basis the SLO was set on."""

from __future__ import annotations

from collections.abc import Iterator

from specpair.analyse.budget import compute
from specpair.analyse.checks.gate import Context, rule
from specpair.analyse.latency import LatencyModel, SloCheck, slo_check
from specpair.analyse.schedule import at_depth, attach
from specpair.analyse.step_inputs import NOT_MODELLED_HINT, not_modelled_text, unmodelled


@rule("SP701")
def _slo(ctx: Context) -> Iterator[tuple[str, str, str]]:
    latency: LatencyModel | SloCheck | None = ctx.latency if ctx.latency is not None \
        else ctx.slo
    if latency is not None and ctx.pair.runbook.speculation.schedule is not None \
            and ctx.budget is not None:
        # under a schedule the break-even that matters is the one of the K in use there
        pair = attach(ctx.pair, ctx.budget)
        assert pair.schedule is not None
        k = pair.schedule.k_at(latency.concurrency)
        if k == 0:
            return  # the engine drafts nothing at this concurrency
        if k != pair.runbook.speculation.num_speculative_tokens:
            fixed = at_depth(pair, k)
            latency = slo_check(fixed, compute(fixed))  # model's verdict, no curve
    if latency is not None and not latency.slo_ok:
        yield latency.slo_verdict, "acceptance.slo.min_length", \
            "raise the SLO only with measurements, or lower concurrency / use a cheaper draft"


@rule("SP703")
def _not_modelled(ctx: Context) -> Iterator[tuple[str, str, str]]:
    refusal = unmodelled(ctx.pair)
    if refusal is not None:
        yield (not_modelled_text(refusal) + "; the break-even check (SP701) is not run",
               "deployment.parallel", NOT_MODELLED_HINT)


@rule("SP702")
def _basis(ctx: Context) -> Iterator[tuple[str, str, str]]:
    acc = ctx.pair.runbook.acceptance
    copied = acc.reference is not None and acc.slo.min_length == acc.reference.mean_length
    how = ("replay your captured requests (a `kind: replay` workload) with `specpair bench`, "
           "then `specpair slo propose RUNBOOK --write`")
    prov = acc.slo.provenance
    if acc.slo.basis != "own_traffic" or copied:
        yield ((f"the SLO copies the benchmark mean {acc.reference.mean_length}" if copied and
                acc.reference else f"the SLO's basis is {acc.slo.basis}"),
               "acceptance.slo.basis", how)
    elif prov is None:
        yield ("the SLO says own_traffic but names no provenance (record or Prometheus "
               "query)", "acceptance.slo.provenance", how)
    elif acc.slo.min_length > prov.interval_low:
        yield (f"min_length {acc.slo.min_length:g} is above what the traffic supports (the "
               f"low end {prov.interval_low:g} of p{acc.slo.percentile} τ's interval in "
               f"{prov.source} {prov.reference})", "acceptance.slo.min_length",
               "propose again from newer traffic rather than raise it by hand")

