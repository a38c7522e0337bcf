"""The two-model memory budget, computed through the engine release's own rules.

One calculator per (engine, version), in that release's package
(`specpair.engines.<release>.budget`); each follows the release's start-up order and
formulas and names them in every line it produces.
"""

from __future__ import annotations

from specpair.analyse.engine_verdict import recorded
from specpair.engines import verified_layouts
from specpair.engines.kv_arithmetic import check_tensor_parallel
from specpair.model.budget import Budget
from specpair.model.errors import Problem, SpecpairError
from specpair.model.lock import EngineVerdict
from specpair.resolve.pair import ResolvedPair


def check_layouts(pair: ResolvedPair) -> list[str]:
    """The allowlist: refuses layouts the oracle has not verified for this engine release,
    unless the runbook declares them; returns the declared ones' notes."""
    refused, notes = verified_layouts.check(pair.engine, verified_layouts.pair_models(pair),
                                    pair.runbook.deployment.assumptions.unverified_layouts)
    if refused:
        where = pair.location("deployment.assumptions.unverified_layouts")
        raise SpecpairError([Problem(where, u.message, u.hint) for u in refused])
    return notes


def compute(pair: ResolvedPair) -> Budget:
    """The pair's budget. Not memoised: a build computes it once per pair
    (`analysis.Analysis.budget`), the gate and the planner reuse the one they are handed.

    Where the lock holds the release's own answer to this pair's question (`specpair
    verify --record`), the budget says so: confirmed by the release's code, or each figure
    where the engine differs. A layout the allowlist refuses is budgeted when the engine
    confirmed it, and refused as before otherwise."""
    draft_tp = pair.runbook.deployment.parallel.draft_tensor
    check_tensor_parallel(pair, draft_tp)
    refuse_moe_over_data_parallel(pair)
    try:
        notes = check_layouts(pair)
        refused = None
    except SpecpairError as exc:
        if pair.engine_verdict is None:
            raise
        notes, refused = [], exc
    budget = pair.release.budget(pair, pair.gpu_spec)
    verdict = recorded(pair, budget) if pair.engine_verdict is not None else None
    if refused is not None and (verdict is None or not verdict.confirmed):
        raise refused
    if verdict is not None:
        return _judged(budget, verdict)
    if notes:
        budget = budget.model_copy(update={"unverified": notes})
    return budget


def _judged(budget: Budget, verdict: EngineVerdict) -> Budget:
    """`budget` marked by the lock's engine verdict for this pair's own question: confirmed
    by the release's code, or each figure where it differs."""
    return budget.model_copy(update={
        "confirmed_by": verdict.provenance if verdict.confirmed else None,
        "engine_differs": verdict.differences})


def recompute(computed: Budget, pair: ResolvedPair) -> Budget:
    """`compute(pair)`, given `computed`, `compute`'s budget of a pair that differs from
    `pair` in deployment.max_running_requests (and deployment.concurrency) alone: the
    release's `recap` where it derives it, which computes again only what those decide
    (the checks above read neither, and `computed` passed them), else `compute`."""
    recap = pair.release.recap
    found = recap(computed, pair, pair.gpu_spec) if recap is not None else None
    return found if found is not None else compute(pair)


def rescheduled(computed: Budget, pair: ResolvedPair) -> Budget:
    """`compute(pair)`, given `computed`, `compute`'s budget of the same pair before its
    speculation schedule was resolved (`schedule.resolve`): the release's `reschedule`
    where it derives it, which computes again only what the schedule decides, else
    `compute`. So a pair with a derived schedule is budgeted once, not twice."""
    hook = pair.release.reschedule
    found = hook(computed, pair, pair.gpu_spec) if hook is not None else None
    # a recorded engine verdict answers the scheduled pair's own question, and decides
    # whether an allowlist-refused layout is budgeted at all: `compute` judges it whole
    # (the derivation from the unscheduled budget knows neither)
    if found is None or pair.engine_verdict is not None:
        return compute(pair)
    return found


def refuse_moe_over_data_parallel(pair: ResolvedPair) -> None:
    """Where the release puts the MoE layers of its data-parallel ranks in one group of
    tensor × data ranks (vLLM: `FusedMoEParallelConfig.make` flattens TP across DP, and
    expert parallelism spans the same ranks), a rank holds 1/(tp·dp) of the experts and
    runs the experts for every replica's tokens. specpair budgets and times each
    data-parallel rank as a replica of its own, so it refuses that deployment by name."""
    par = pair.runbook.deployment.parallel
    if par.data == 1 or "moe_over_data_parallel" not in pair.release.profile.capabilities:
        return
    moe = [role for role, model in (("target", pair.target), ("draft", pair.draft))
           if model is not None and model.geometry.moe is not None]
    if moe:
        raise SpecpairError([Problem(
            pair.location("deployment.parallel.data"),
            f"not modelled: data parallelism of an MoE {moe[0]} on "
            f"{pair.engine}: its MoE layers are one group over tensor × data = "
            f"{par.tensor} × {par.data} ranks (FusedMoEParallelConfig.make), while specpair "
            "budgets and times each data-parallel rank as a replica of its own",
            "set data: 1 and run one deployment per replica, or fold the replicas into "
            f"tensor: {par.tensor * par.data}")])
