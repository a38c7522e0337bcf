"""What `specpair plan` is asked: the GPUs (`--gpus`, read by `expand_gpus`) and how many
one replica may use, the latency targets, and a concurrency or request rate."""

from __future__ import annotations

from dataclasses import dataclass

from specpair.facts import hardware

COMMON = "common"


class PlanError(Exception):
    """Bad planner options (the CLI turns it into a usage error)."""


@dataclass(frozen=True)
class Targets:
    tpot_ms: float | None = None
    ttft_ms: float | None = None
    concurrency: int | None = None
    rate: float | None = None


@dataclass(frozen=True)
class Options:
    gpus: tuple[str, ...] = ()
    """Catalog keys; empty: the runbook's GPU."""
    max_gpus: int | None = None
    """GPUs one replica may use (TP × PP); default: the runbook's GPUs per node."""
    targets: Targets = Targets()
    top: int = 10


def expand_gpus(names: list[str]) -> tuple[str, ...]:
    """Catalog keys from --gpus (`common`: the catalog's common serving GPUs)."""
    out: list[str] = []
    for name in names:
        if name.strip().casefold() == COMMON:
            out.extend(g.key for g in hardware.CATALOG.values() if g.common)
            continue
        found = hardware.lookup(name)
        if found is None:
            raise PlanError(f"unknown GPU {name!r}; {hardware.unknown_hint(name)}")
        out.append(found.key)
    return tuple(dict.fromkeys(out))
