"""The links between a GPU's tensor-parallel ranks, with their measured or datasheet
figures, and which link a GPU's ranks all-reduce over."""

from __future__ import annotations

from dataclasses import dataclass

from specpair.facts.hardware import GPU


@dataclass(frozen=True)
class Link:
    bandwidth: float  # bytes/s per direction between two ranks, as an all-reduce sees it
    why: str


LINKS: dict[str, Link] = {
    "nvlink3": Link(300e9, "A100 NVLink 3: 600 GB/s bidirectional per GPU (NVIDIA A100 "
                    "datasheet), 300 GB/s each way"),
    "nvlink4": Link(450e9, "H100/H200 SXM NVLink 4: 900 GB/s bidirectional per GPU (NVIDIA "
                    "H100 datasheet), 450 GB/s each way"),
    "nvlink5": Link(900e9, "B200/B300/GB200 NVLink 5: 1.8 TB/s bidirectional per GPU "
                    "(NVIDIA Blackwell datasheet), 900 GB/s each way"),
    "xgmi": Link(448e9, "MI300X/MI325X/MI355X Infinity Fabric: 7 links × 64 GB/s to the "
                 "other GPUs of the platform (AMD MI300X datasheet)"),
    "pcie4": Link(32e9, "PCIe 4.0 x16 with peer-to-peer: 32 GB/s each way"),
    "pcie5": Link(64e9, "PCIe 5.0 x16 with peer-to-peer: 64 GB/s each way"),
    "pcie4-host": Link(10e9, "PCIe 4.0 without GPU peer-to-peer, staged through host memory "
                       "(NCCL's SHM transport): ~19-21 GB/s bidirectional measured by CUDA's "
                       "p2pBandwidthLatencyTest with P2P disabled on A40s (NVIDIA/nccl-tests "
                       "issue #74), ~10 GB/s each way"),
    "pcie5-host": Link(27e9, "PCIe 5.0 without GPU peer-to-peer, staged through host memory "
                       "(NCCL's SHM transport): NCCL all_reduce_perf on 4x GeForce RTX 5090 "
                       "(PCIe 5.0, no P2P: 'via SHM/direct/direct'), NCCL 2.26.2 on an AMD "
                       "Genoa host, bus bandwidth 24.1 GB/s at 4 MB, 25.7 at 8 MB, 27.3 at "
                       "128 MB (NVIDIA/nccl-tests issue #287, comment of 2025-03-14); its "
                       "8-byte all-reduce takes 15.5 µs, the latency `allreduce_s` carries. "
                       "A measurement of another machine, independent of every calibration "
                       "point; what a given deployment's host staging reaches of it is "
                       "`host_link` (fitted where points with such a link exist)"),
}
def link_for(gpu: GPU, p2p: bool | None = None) -> str:
    """The link between a GPU's tensor-parallel ranks: its catalog `interconnect` (NVLink or
    xGMI on SXM/OAM boards, PCIe on PCIe cards), through host memory where the card has no
    peer-to-peer (`p2p` None: as the card ships, the catalog's `peer_to_peer`). A GPU
    declared inline names no interconnect: PCIe 4.0 with peer-to-peer, the slowest link
    such a deployment is served over."""
    base = gpu.interconnect or "pcie4"
    if not base.startswith("pcie"):
        return base
    if p2p is False or (p2p is None and not gpu.peer_to_peer):
        return f"{base}-host"
    return base
