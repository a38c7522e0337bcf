"""The GPU catalog: memory, bandwidth and dense BF16/FP8 FLOP/s per GPU, with sources.

The figures live in `data/gpus.yaml` (reviewed data, one source per entry); this module
loads them, looks keys up case-insensitively (with a "did you mean" for near misses) and
turns a GPU declared inline in a runbook into the same shape. Values are per GPU and
dense (without 2:4 sparsity). `memory_bytes` is what the driver reports as total memory
(nvidia-smi `memory.total`), because both engines size from that number.
"""

from __future__ import annotations

import difflib
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from specpair.facts import yaml_data
from specpair.model.common import Strict
from specpair.model.memo import value_memo
from specpair.model.runbook import InlineGPU

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
    measured_bandwidth_bytes_per_s: float | None = None
    """What a bandwidth test's fastest reading kernel (STREAM-class, large arrays) reaches
    on this GPU, from a published measurement (`bandwidth_measurement`); None where none
    was found."""
    bandwidth_measurement: str = ""
    memory_kind: Literal["hbm", "gddr"] | None = None
    """The GPU's DRAM kind; None for a GPU declared inline (not asked)."""
    interconnect: str | None = None
    """What its tensor-parallel ranks all-reduce over (a `step_links.LINKS` key); None for
    a GPU declared inline (not asked)."""
    peer_to_peer: bool = True
    """False where the card ships without GPU peer-to-peer (GeForce)."""

    @property
    def memory_system(self) -> tuple[str, str] | None:
        """(vendor, memory kind): what sets the share of its peak bandwidth a GPU reaches;
        None where the catalog does not know it (an inline GPU)."""
        if self.family is None or self.memory_kind is None:
            return None
        return ("amd" if self.family.startswith("cdna") else "nvidia"), self.memory_kind

    @property
    def achievable_bandwidth_bytes_per_s(self) -> float:
        """The memory roof the step model's decode reads run against: the measured figure,
        else the peak times an assumed share (`assumed_bandwidth_share`). Datasheet peaks
        are not equally reachable: HBM on one vendor's GPUs reaches a larger share of its
        peak than on another's (BabelStream's fastest kernel: 0.93-0.95 on H100/H200, 0.80
        on MI300X), GDDR more than HBM, so a share of the peak fitted on one family would
        not carry to the next."""
        if self.measured_bandwidth_bytes_per_s is not None:
            return self.measured_bandwidth_bytes_per_s
        return self.bandwidth_bytes_per_s * assumed_bandwidth_share(self)[0]

    def _basis(self) -> str:
        """The peak and whether (and how) the roof below it was measured or assumed."""
        peak = f"{self.bandwidth_bytes_per_s / 1e12:g} TB/s peak"
        if self.measured_bandwidth_bytes_per_s is not None:
            return f"{peak}, {self.measured_bandwidth_bytes_per_s / 1e12:g} TB/s measured"
        share, basis = assumed_bandwidth_share(self)
        return f"{peak}, not measured: {share:.2f} of it assumed reachable ({basis})"

    @property
    def bandwidth_basis(self) -> str:
        """The memory roof and where it comes from, the measurement quoted."""
        if self.measured_bandwidth_bytes_per_s is None:
            return self._basis()
        return f"{self._basis()} ({self.bandwidth_measurement})"

    @property
    def bandwidth_summary(self) -> str:
        """`bandwidth_basis` without the measurement's quote: one line per GPU in a plan."""
        return f"{self.key}: {self._basis()}"


Interconnect = Literal["nvlink3", "nvlink4", "nvlink5", "xgmi", "pcie4", "pcie5"]


class CatalogEntry(Strict):
    """One GPU of data/gpus.yaml as written (the file's header documents each field)."""

    key: str
    aliases: list[str] = Field(default_factory=list)
    name: str
    family: str
    common: bool = False
    memory_mib: int = Field(gt=0)
    memory_status: Literal["reported", "assumed"]
    bandwidth_tb_s: float = Field(gt=0)
    memory_kind: Literal["hbm", "gddr"] = Field(
        description="the DRAM kind sets the share of its peak a GPU reaches")
    interconnect: Interconnect
    peer_to_peer: bool = True
    measured_bandwidth_tb_s: float | None = Field(default=None, gt=0)
    bandwidth_measurement: str = ""
    bf16_dense_tflops: float = Field(gt=0)
    fp8_dense_tflops: float | None = Field(default=None, gt=0)
    fp4_dense_tflops: float | None = Field(default=None, gt=0)
    free_before_load_gib: float = Field(gt=0)
    source: str
    status: Literal["checked", "datasheet"]

    @model_validator(mode="after")
    def _measured(self) -> CatalogEntry:
        measured = self.measured_bandwidth_tb_s
        if measured is not None and measured > self.bandwidth_tb_s:
            raise ValueError(f"measured_bandwidth_tb_s {measured} must lie in (0, the "
                             f"{self.bandwidth_tb_s} TB/s peak]")
        if measured is not None and not self.bandwidth_measurement.strip():
            raise ValueError("measured_bandwidth_tb_s needs its bandwidth_measurement "
                             "(source, method, quote)")
        return self


def _entry(raw: CatalogEntry) -> GPU:
    note = "" if raw.memory_status == "reported" else (
        f"memory.total assumed {raw.memory_mib:,} MiB (not seen reported)")
    if raw.status == "datasheet":
        note = "; ".join(x for x in (note, "figures from the datasheet, not re-retrieved") if x)
    measured = raw.measured_bandwidth_tb_s
    return GPU(key=raw.key, name=raw.name, memory_bytes=raw.memory_mib * MiB,
               bandwidth_bytes_per_s=raw.bandwidth_tb_s * 1e12,
               bf16_dense_flops=raw.bf16_dense_tflops * 1e12,
               source=" ".join(raw.source.split()),
               free_before_load_bytes=int(raw.free_before_load_gib * GiB),
               note=note, family=raw.family,
               fp8_dense_flops=raw.fp8_dense_tflops * 1e12
               if raw.fp8_dense_tflops is not None else None,
               fp4_dense_flops=raw.fp4_dense_tflops * 1e12
               if raw.fp4_dense_tflops is not None else None,
               aliases=tuple(raw.aliases), common=raw.common,
               measured_bandwidth_bytes_per_s=measured * 1e12 if measured is not None else None,
               bandwidth_measurement=" ".join(raw.bandwidth_measurement.split()),
               memory_kind=raw.memory_kind, interconnect=raw.interconnect,
               peer_to_peer=raw.peer_to_peer)


def _load() -> dict[str, GPU]:
    text = resources.files("specpair").joinpath("data/gpus.yaml").read_text(encoding="utf-8")
    entries = []
    for i, raw in enumerate(yaml_data.safe_load(text)["gpus"]):
        try:
            entries.append(CatalogEntry.model_validate(raw))
        except ValidationError as exc:
            where = raw.get("key", f"entry {i}") if isinstance(raw, dict) else f"entry {i}"
            raise ValueError(f"data/gpus.yaml {where}: {exc}") from None
    return {g.key: g for g in map(_entry, entries)}


CATALOG: dict[str, GPU] = _load()


def _measured_by_system(gpus: Iterable[GPU]) -> dict[tuple[str, str] | None,
                                                   list[tuple[str, float]]]:
    """(key, measured / peak bandwidth) of the measured GPUs per (vendor, memory kind), and
    of all of them (None)."""
    out: dict[tuple[str, str] | None, list[tuple[str, float]]] = {None: []}
    for g in gpus:
        if g.measured_bandwidth_bytes_per_s is not None:
            share = (g.key, g.measured_bandwidth_bytes_per_s / g.bandwidth_bytes_per_s)
            out.setdefault(g.memory_system, []).append(share)
            out[None].append(share)
    if not out[None]:
        raise ValueError("data/gpus.yaml: no GPU has a measured_bandwidth_tb_s")
    return out


_MEASURED = _measured_by_system(CATALOG.values())
_BY_NAME: dict[str, GPU] = {name.casefold(): g for g in CATALOG.values()
                            for name in (g.key, *g.aliases)}


def assumed_bandwidth_share(gpu: GPU) -> tuple[float, str]:
    """The share of its peak bandwidth a GPU without a published measurement is taken to
    reach, and why: the median over the measured GPUs of its vendor and memory kind (one
    memory-controller design, one kind of DRAM), else over every measured GPU."""
    system = gpu.memory_system if gpu.memory_system in _MEASURED else None
    measured = _MEASURED[system]
    share = statistics.median(s for _, s in measured)
    if system is None:
        return share, "the median measured share of the catalog's GPUs"
    vendor, kind = system
    return share, (f"the median measured share of the catalog's {vendor.upper()} "
                   f"{kind.upper()} GPUs: {', '.join(k for k, _ in measured)}")


def lookup(key: str) -> GPU | None:
    """The catalog entry for a key or alias, any case; None when there is none."""
    return _BY_NAME.get(key.strip().casefold())


# words a driver's device name carries that no catalog key does ("NVIDIA GeForce RTX 4090",
# "AMD Instinct MI300X"), and the memory and package words that tell no model apart
_VENDOR_WORDS = {"nvidia", "amd", "geforce", "instinct", "tesla", "radeon"}
_DETAIL = re.compile(r"^(\d+gb|hbm\d*e?|sxm\d*|ac)$")


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[\s_\-]+", name.casefold())
            if w and w not in _VENDOR_WORDS]


def _model_word(words: list[str]) -> str | None:
    """The word that names the chip ("h100", "mi300x", "4090"): the first with a digit
    that is not a memory size or a package."""
    return next((w for w in words if any(c.isdigit() for c in w) and not _DETAIL.match(w)),
                None)


def _by_model_word(key: str) -> list[str]:
    """Catalog keys of the chip a device name (as nvidia-smi or rocm-smi prints it) names,
    the closest variant first: the words they share, less the variant words (PCIe, NVL)
    the name does not say."""
    words = _words(key)
    chip = _model_word(words)
    if chip is None:
        return []
    scored = []
    for gpu in CATALOG.values():
        own = _words(gpu.key)
        if _model_word(own) != chip:
            continue
        extra = [w for w in own if w not in words and not _DETAIL.match(w)]
        scored.append((len(set(own) & set(words)) - len(extra), gpu.key))
    best = max((score for score, _ in scored), default=None)
    return [k for score, k in scored if score == best]


def suggestions(key: str) -> list[str]:
    """Catalog keys close to a misspelled one or to a driver's device name, best first."""
    chip = _by_model_word(key)
    if chip:
        return chip[:3]
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
               if spec.fp8_dense_tflops is not None else None,
               measured_bandwidth_bytes_per_s=spec.measured_bandwidth_tb_s * 1e12
               if spec.measured_bandwidth_tb_s is not None else None,
               bandwidth_measurement="declared inline in the runbook"
               if spec.measured_bandwidth_tb_s is not None else "")


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
