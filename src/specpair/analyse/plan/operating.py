"""A candidate's operating point: the concurrency it runs at (and, for a request rate, the
replicas that serve it) within the latency targets, keeping a draft's SLO 10% above
break-even."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from specpair.analyse.latency import SLO_MARGIN
from specpair.analyse.plan.evaluators import Evaluator, Operating
from specpair.analyse.plan.options import Targets
from specpair.analyse.plan.results import Mode

# The plan's own exclusion rules, named in each row's notes as the gate's are ("id: why")
LOAD = "plan-load"          # the KV pool holds the concurrency at the expected context
TARGETS = "plan-targets"    # --tpot-ms / --ttft-ms
SLO = "plan-slo-margin"     # the SLO clears break-even + 10%
TAU = "plan-tau-below-slo"  # the expected acceptance at this depth reaches its SLO
GPUS = "plan-max-gpus"      # the replicas a rate needs fit --max-gpus


@dataclass(frozen=True)
class Goal:
    """What an operating point must meet: the plan's mode and targets."""

    mode: Mode
    targets: Targets
    concurrency: int | None
    """The concurrency every candidate runs at ("concurrency" mode)."""
    output: float
    """Mean output tokens per request: a rate's demand in tokens per second."""
    max_gpus: int

    def meets(self, op: Operating) -> bool:
        t = self.targets
        return (t.tpot_ms is None or op.tpot_s * 1e3 <= t.tpot_ms) and \
            (t.ttft_ms is None or op.ttft_s * 1e3 <= t.ttft_ms)

    def pays(self, op: Operating, tau_slo: float | None) -> bool:
        floor = op.tau_slo if op.depth is not None else tau_slo
        return op.break_even is None or (floor is not None and
                                         floor >= op.break_even * (1 + SLO_MARGIN))

    def operate(self, ev: Evaluator, cap: int, gpus: int, tau_slo: float | None
                ) -> tuple[Operating, int] | str:
        """(operating point, replicas), or why there is none."""
        def good(c: int) -> bool:
            op = ev.at(c)
            return self.meets(op) and self.pays(op, tau_slo)

        if self.mode == "concurrency":
            c = self.concurrency
            assert c is not None
            if c > cap:
                return f"{LOAD}: holds {cap} sequences, not {c}"
            op = ev.at(c)
            if not self.meets(op):
                return self.missed(op)
            if not self.pays(op, tau_slo):
                return (f"{SLO}: the SLO is below break-even + 10% at {c} "
                        f"(τ* {op.break_even:.2f})")
            return op, 1
        top = largest(good, cap)
        if top is None:
            op = ev.at(1)
            if not self.meets(op):
                return self.missed(op) + " even at concurrency 1"
            return f"{SLO}: the SLO is below break-even + 10% at every concurrency " \
                   f"(τ* at 1: {op.break_even:.2f})"
        if self.mode == "max":
            return ev.at(top), 1
        assert self.targets.rate is not None
        demand = self.targets.rate * self.output
        best = ev.at(top)
        replicas = max(1, math.ceil(demand / best.throughput - 1e-9))
        if replicas * gpus > self.max_gpus:
            return (f"{GPUS}: needs {replicas} replicas of {gpus} GPU(s) for "
                    f"{demand:,.0f} tokens/s; --max-gpus is {self.max_gpus}")
        load = demand / replicas
        c = smallest(lambda n: ev.at(n).throughput >= load, top)
        assert c is not None
        return ev.at(c), replicas

    def missed(self, op: Operating) -> str:
        t = self.targets
        parts = []
        if t.tpot_ms is not None and op.tpot_s * 1e3 > t.tpot_ms:
            parts.append(f"TPOT {op.tpot_s * 1e3:.1f} ms > {t.tpot_ms:g}")
        if t.ttft_ms is not None and op.ttft_s * 1e3 > t.ttft_ms:
            parts.append(f"TTFT {op.ttft_s * 1e3:.0f} ms > {t.ttft_ms:g}")
        return f"{TARGETS}: misses " + ", ".join(parts)


def largest(ok: Callable[[int], bool], hi: int) -> int | None:
    """Largest c in [1, hi] with ok(c), for ok monotone (true then false)."""
    if hi < 1 or not ok(1):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def smallest(ok: Callable[[int], bool], hi: int) -> int | None:
    """Smallest c in [1, hi] with ok(c), for ok monotone (false then true)."""
    if hi < 1 or not ok(hi):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
