"""The GPU catalog: memory, bandwidth and dense BF16/FP8 FLOP/s per GPU, with sources.

The figures live in `data/gpus.yaml` (reviewed data, one source per entry); this module
loads them, looks keys up case-insensitively (with a "did you mean" for near misses) and
turns a GPU declared inline in a runbook into the same shape. Values are per GPU and
dense (without 2:4 sparsity). `memory_bytes` is what the driver reports as total memory
(nvidia-smi `memory.total`), because both engines size from that number.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from specpair.memo import value_memo
from specpair.schema.runbook import InlineGPU

MiB = 1 << 20
GiB = 1 << 30
INLINE_FREE_MARGIN_GIB = 2.0
"""P for an inline GPU without free_before_load_gib: total memory less what CUDA/NCCL
initialisation takes on the catalog's GPUs (1-4 GiB; 2 GiB is the middle)."""


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    memory_bytes: int
    """Total device memory as the driver reports it."""
    bandwidth_bytes_per_s: float
    bf16_dense_flops: float
    source: str
    free_before_load_bytes: int
    """Default assumption for P, the free memory a rank sees after CUDA/NCCL init and
    before weights load (SGLang measures it; we cannot). Override per runbook."""
    note: str = ""
    family: str | None = None
    """Architecture family (hopper, ampere, ...): calibration is kept per family. None for
    a GPU declared inline."""
    fp8_dense_flops: float | None = None
    fp4_dense_flops: float | None = None
    """Dense FP4 tensor peak where the GPU has FP4 tensor cores (Blackwell): what NVFP4
    (W4A4) GEMMs run at."""
    aliases: tuple[str, ...] = ()
    common: bool = False
    """One of the data-center GPUs `specpair plan --gpus common` searches."""


def _entry(raw: dict[str, Any]) -> GPU:
    fp8 = raw.get("fp8_dense_tflops")
    fp4 = raw.get("fp4_dense_tflops")
    note = "" if raw.get("memory_status") == "reported" else (
        f"memory.total assumed {raw['memory_mib']:,} MiB (not seen reported)")
    if raw.get("status") == "datasheet":
        note = "; ".join(x for x in (note, "figures from the datasheet, not re-retrieved") if x)
    return GPU(key=raw["key"], name=raw["name"], memory_bytes=int(raw["memory_mib"]) * MiB,
               bandwidth_bytes_per_s=float(raw["bandwidth_tb_s"]) * 1e12,
               bf16_dense_flops=float(raw["bf16_dense_tflops"]) * 1e12,
               source=" ".join(str(raw["source"]).split()),
               free_before_load_bytes=int(float(raw["free_before_load_gib"]) * GiB),
               note=note, family=raw["family"],
               fp8_dense_flops=float(fp8) * 1e12 if fp8 is not None else None,
               fp4_dense_flops=float(fp4) * 1e12 if fp4 is not None else None,
               aliases=tuple(raw.get("aliases") or ()), common=bool(raw.get("common")))


def _load() -> dict[str, GPU]:
    text = resources.files("specpair").joinpath("data/gpus.yaml").read_text(encoding="utf-8")
    return {g.key: g for g in (_entry(raw) for raw in yaml.safe_load(text)["gpus"])}


CATALOG: dict[str, GPU] = _load()
_BY_NAME: dict[str, GPU] = {name.casefold(): g for g in CATALOG.values()
                            for name in (g.key, *g.aliases)}


def lookup(key: str) -> GPU | None:
    """The catalog entry for a key or alias, any case; None when there is none."""
    return _BY_NAME.get(key.strip().casefold())


def suggestions(key: str) -> list[str]:
    """Catalog keys close to a misspelled one, best first."""
    names = {n: g.key for n, g in _BY_NAME.items()}
    close = difflib.get_close_matches(key.strip().casefold(), list(names), n=6, cutoff=0.5)
    return list(dict.fromkeys(names[c] for c in close))[:3]


def unknown_hint(key: str) -> str:
    near = suggestions(key)
    mean = f"did you mean {' or '.join(near)}? " if near else ""
    return (f"{mean}use a catalog key ({', '.join(sorted(CATALOG))}) or declare the GPU "
            "inline: gpu: {name: ..., memory_mib: ..., bandwidth_tb_s: ..., "
            "bf16_dense_tflops: ..., fp8_dense_tflops: ...}")


def inline(spec: InlineGPU) -> GPU:
    memory = spec.memory_mib * MiB
    free = (int(spec.free_before_load_gib * GiB) if spec.free_before_load_gib is not None
            else memory - int(INLINE_FREE_MARGIN_GIB * GiB))
    return GPU(key=spec.name, name=spec.name, memory_bytes=memory,
               bandwidth_bytes_per_s=spec.bandwidth_tb_s * 1e12,
               bf16_dense_flops=spec.bf16_dense_tflops * 1e12,
               source="declared inline in the runbook", free_before_load_bytes=free,
               note="" if spec.free_before_load_gib is not None else
               f"free before load assumed total − {INLINE_FREE_MARGIN_GIB:g} GiB",
               fp8_dense_flops=spec.fp8_dense_tflops * 1e12
               if spec.fp8_dense_tflops is not None else None)


@value_memo  # the catalog is a constant, an inline GPU a frozen value; read per candidate
def resolve(gpu: str | InlineGPU) -> GPU:
    """The GPU a deployment runs on; KeyError (with a hint) for an unknown key."""
    if isinstance(gpu, InlineGPU):
        return inline(gpu)
    found = lookup(gpu)
    if found is None:
        raise KeyError(f"unknown GPU {gpu!r}: {unknown_hint(gpu)}")
    return found


def display_key(gpu: str | InlineGPU) -> str:
    """The catalog key as the catalog spells it (an inline GPU: its name)."""
    if isinstance(gpu, InlineGPU):
        return gpu.name
    found = lookup(gpu)
    return found.key if found is not None else gpu
