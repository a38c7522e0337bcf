"""The GPU catalog: memory, bandwidth and dense BF16 FLOP/s per GPU, with sources.

Values are per GPU and dense (without 2:4 sparsity). `memory_bytes` is what the driver
reports as total memory (nvidia-smi `memory.total`), because both engines size from that
number, not from the marketing capacity. Sources are in ../shared/REFERENCE_MODELS.md §5.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20
GiB = 1 << 30


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


def _gpu(key: str, name: str, total_mib: int, bandwidth_tb_s: float, tflops: float,
         source: str, free_before_load_gib: float, note: str = "") -> GPU:
    return GPU(key, name, total_mib * MiB, bandwidth_tb_s * 1e12, tflops * 1e12, source,
               int(free_before_load_gib * GiB), note)


CATALOG: dict[str, GPU] = {g.key: g for g in (
    _gpu("H100-80GB", "NVIDIA H100 SXM 80GB", 81_559, 3.35, 989.4,
         "NVIDIA H100 datasheet (989.4 TFLOP/s BF16 dense, 3.35 TB/s); 81,559 MiB as "
         "reported by nvidia-smi (ENGINE_NOTES_SGLANG §4.7)", 78.0),
    _gpu("H200-141GB", "NVIDIA H200 SXM 141GB", 143_771, 4.8, 989.0,
         "NVIDIA H200 product page (4.8 TB/s, 1,979 TFLOP/s BF16 sparse → ~989 dense); "
         "143,771 MiB as reported by nvidia-smi (ENGINE_NOTES_SGLANG §4.7)", 138.5),
    _gpu("B200-180GB", "NVIDIA B200 (HGX, 1,000 W)", 183_359, 8.0, 2250.0,
         "NVIDIA Blackwell datasheet via glennklockwood.com (2,250 TFLOP/s dense, 8 TB/s); "
         "179 GB measured by Vultr", 175.0,
         "memory.total assumed 183,359 MiB (179 GiB); capacity differs by product (180 vs 192 GB)"),
    _gpu("A100-80GB", "NVIDIA A100 SXM 80GB", 81_920, 2.039, 312.0,
         "NVIDIA A100 datasheet (312 TFLOP/s BF16 dense, 2,039 GB/s)", 78.5,
         "memory.total assumed 81,920 MiB"),
    _gpu("L40S-48GB", "NVIDIA L40S", 46_068, 0.864, 362.05,
         "NVIDIA L40S datasheet (362.05 TFLOP/s BF16 dense, 864 GB/s)", 44.0,
         "memory.total assumed 46,068 MiB (ECC on)"),
    _gpu("MI300X-192GB", "AMD Instinct MI300X", 196_592, 5.3, 1307.4,
         "AMD MI300X datasheet (1,307.4 TFLOP/s BF16 dense, 5.3 TB/s)", 188.0,
         "memory.total assumed 196,592 MiB"),
)}
