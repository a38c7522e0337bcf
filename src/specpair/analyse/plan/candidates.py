"""The search space of a plan: the deployments (GPU type, TP, KV dtype, memory fraction)
and the draft shapes (depth, schedule, or no draft) a pair is searched over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specpair.analyse.plan.options import Options, PlanError
from specpair.analyse.plan.variants import Changes
from specpair.model.common import KVDtype, Method
from specpair.model.runbook import Runbook
from specpair.resolve.pair import ResolvedPair

TP_SIZES = (1, 2, 4, 8, 16)
MAX_DEPTH = 8
"""Deepest chain or tree searched: the published sweeps stop at 7-8 drafted tokens."""
MEMORY_FRACTIONS = (0.80, 0.85, 0.90)
"""Searched besides the engine default and the runbook's own value; above 0.90 the
engines' activation and graph headroom is the operator's call, not a planner's."""
KV_DTYPES = (KVDtype.AUTO, KVDtype.FP8_E4M3)


@dataclass(frozen=True)
class DeploymentChoice:
    gpu: str
    tensor: int
    kv: KVDtype
    memory_fraction: float | None

    def label(self) -> str:
        mf = "default" if self.memory_fraction is None else f"{self.memory_fraction:g}"
        return f"{self.gpu} TP{self.tensor} KV {self.kv.value} mem {mf}"


@dataclass(frozen=True)
class ShapeChoice:
    label: str
    depth: int               # 0: no draft; a schedule: its largest K
    changes: tuple[tuple[tuple[str, ...], Any], ...]
    scheduled: bool = False  # K by batch size (`specpair.analyse.schedule`), up to `depth`

    @property
    def speculative(self) -> bool:
        return self.depth > 0


BASELINE = ShapeChoice("no draft (target alone)", 0, ())


def shapes(pair: ResolvedPair) -> list[ShapeChoice]:
    """The draft shapes the pair's method supports (the runbook's own among them)."""
    spec = pair.runbook.speculation
    m = spec.method
    out: list[ShapeChoice] = []
    if m.is_block_drafter:
        # SP303: a block drafter runs the block it was trained with; nothing to search
        assert spec.block_size is not None
        depth = spec.block_size if m is Method.DSPARK else spec.block_size - 1
        out.append(ShapeChoice(f"block {spec.block_size}", depth, ()))
    elif spec.num_steps is not None:
        for steps in range(1, MAX_DEPTH + 1):
            ch: list[tuple[tuple[str, ...], Any]] = [(("speculation", "num_steps"), steps)]
            width = spec.num_draft_tokens
            if spec.topk == 1:
                width = steps + 1
                if spec.num_draft_tokens is not None:
                    ch.append((("speculation", "num_draft_tokens"), width))
            out.append(ShapeChoice(f"{steps} steps × top-{spec.topk}, {width} verified",
                                   steps, tuple(ch)))
    else:
        for gamma in range(1, MAX_DEPTH + 1):
            out.append(ShapeChoice(f"γ = {gamma}", gamma,
                                   ((("speculation", "num_speculative_tokens"), gamma),)))
        if spec.schedule is not None and spec.num_speculative_tokens is not None:
            # the runbook's own schedule, as written (no change to recommend)
            form = "derived" if spec.schedule == "derived" else "pinned"
            out.append(ShapeChoice(f"schedule ({form}, K ≤ {spec.num_speculative_tokens})",
                                   spec.num_speculative_tokens, (), scheduled=True))
        if pair.release.schedule_refusal_for(pair) is None:
            # one schedule up to the deepest depth searched: it picks the shorter ones
            out.append(ShapeChoice(f"schedule (derived, K ≤ {MAX_DEPTH})", MAX_DEPTH, (
                (("speculation", "num_speculative_tokens"), MAX_DEPTH),
                (("speculation", "schedule"), "derived")), scheduled=True))
    return out


def parallel_changes(rb: Runbook, tensor: int) -> Changes:
    par = rb.deployment.parallel
    ch: Changes = {("deployment", "parallel", "tensor"): tensor}
    # sizes that follow the target's TP in the runbook keep following it
    if par.draft_tensor is not None and par.draft_tensor == par.tensor and par.tensor != 1:
        ch[("deployment", "parallel", "draft_tensor")] = tensor
    if par.expert != 1 and par.expert == par.tensor:
        ch[("deployment", "parallel", "expert")] = tensor
    return ch


def deployment_choices(pair: ResolvedPair, opts: Options) -> list[DeploymentChoice]:
    rb = pair.runbook
    dep = rb.deployment
    gpus = list(opts.gpus) or [pair.gpu]
    max_gpus = opts.max_gpus or dep.gpus_per_node
    pp = dep.parallel.pipeline
    tps = [t for t in TP_SIZES if t * pp <= max_gpus and t <= dep.gpus_per_node]
    if not tps:
        raise PlanError(f"no TP size fits {max_gpus} GPU(s) with pipeline size {pp}")
    # a runbook that sets the fraction keeps setting one (an edit never deletes a field)
    fractions: list[float | None] = [*MEMORY_FRACTIONS]
    if dep.memory_fraction is None:
        fractions.insert(0, None)
    elif dep.memory_fraction not in fractions:
        fractions.append(dep.memory_fraction)
    kvs = list(dict.fromkeys([dep.kv_cache_dtype, *KV_DTYPES]))
    return [DeploymentChoice(g, t, kv, mf) for g in gpus for t in tps for kv in kvs
            for mf in fractions]
