"""Decode-shaped GEMMs on one GPU: the achieved share of peak bandwidth and the time near
the roofline's ridge, for the step model's bounds (η_bw) and its blended roofline.

    python benchmarks/device/roofline_h200.py OUT.json    # on a CUDA machine with torch

For BF16 weight matrices of serving shapes (N × K) it times y = x·Wᵀ for M = 1 … 4096 rows
(CUDA graphs replayed, median of the timed replays, L2 flushed between replays by a 256 MB
write), and writes every time with the bytes and FLOPs it moves. Nothing here is fitted:
the file records what the GPU did. tests/analyse/test_roofline_measured.py reads the copy kept in
tests/fixtures/measured/h200_gemm_roofline.json (measured 2026-12-04 on one H200 SXM, torch
2.11.0+cu130, cuBLAS BF16).
"""

from __future__ import annotations

import json
import sys
import time

import torch
from _timing import graphed, timed  # beside this file (run as a script)

SHAPES = [(8192, 8192), (28672, 8192), (8192, 28672), (57344, 8192)]
ROWS = [1, 2, 4, 8, 16, 32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 512, 768, 1024,
        2048, 4096]


def _stream_read(dev: torch.device, flush: torch.Tensor) -> float:
    """A plain streaming read of 4 GiB: the bandwidth ceiling a kernel can reach here."""
    big = torch.ones(4 << 30, dtype=torch.uint8, device=dev).view(torch.int64)
    for _ in range(3):
        big.sum()
    return big.numel() * 8 / timed(big.sum, flush)


def main() -> None:
    out_path = sys.argv[1]
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    rows = []
    stream_read = _stream_read(dev, flush)
    for n, k in SHAPES:
        w = torch.randn(n, k, dtype=torch.bfloat16, device=dev) / 64
        for m in ROWS:
            x = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
            y = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
            t = timed(graphed(lambda a=x, b=w, c=y: torch.matmul(a, b.t(), out=c)), flush)
            rows.append({"n": n, "k": k, "m": m, "seconds": t,
                         "bytes": 2 * (n * k + m * k + m * n), "flops": 2 * m * n * k})
        del w
    with open(out_path, "w") as out:
        json.dump({"gpu": props.name, "multiprocessors": props.multi_processor_count,
                   "torch": torch.__version__, "cuda": torch.version.cuda,
                   "measured_at": time.strftime("%Y-%m-%d"),
                   "stream_read_bytes_per_s": stream_read, "gemm": rows}, out, indent=1)
    print(json.dumps({"stream_read_TB_s": stream_read / 1e12, "rows": len(rows)}))


if __name__ == "__main__":
    main()
