"""FP8 (E4M3, per-tensor scales) GEMMs of serving shapes on one GPU, beside BF16: the share
of each dtype's datasheet peak that cuBLAS reaches, and the GEMV bandwidth of 1-byte weights.

    python benchmarks/device/fp8_gemm_h200.py OUT.json    # on a CUDA machine with torch

Same method as roofline_h200.py (CUDA-graph replays, median of 30, L2 flushed between
them). The step model charges FP8 weights' FLOPs at η_f × the FP8 peak with the η_f fitted
mostly on BF16 points; this records whether FP8 reaches the same share of its own peak.
"""

from __future__ import annotations

import json
import sys
import time

import torch
from _timing import graphed, timed  # beside this file (run as a script)

SHAPES = [(8192, 8192), (28672, 8192), (57344, 8192)]
ROWS = [1, 16, 64, 256, 1024, 4096, 8192]


def main() -> None:
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    one = torch.ones((), dtype=torch.float32, device=dev)
    rows = []
    for n, k in SHAPES:
        w16 = torch.randn(n, k, dtype=torch.bfloat16, device=dev) / 64
        w8 = w16.to(torch.float8_e4m3fn)
        for m in ROWS:
            x16 = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
            # cuBLASLt FP8 needs M a multiple of 16: M = 1 is run as 16 rows
            m8 = max(m, 16)
            x8 = torch.randn(m8, k, dtype=torch.bfloat16, device=dev).to(torch.float8_e4m3fn)
            bf16 = timed(graphed(lambda a=x16, b=w16: torch.matmul(a, b.t())), flush)
            fp8 = timed(graphed(lambda a=x8, b=w8: torch._scaled_mm(
                a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), flush)
            rows.append({"n": n, "k": k, "m": m, "bf16_seconds": bf16, "fp8_seconds": fp8,
                         "fp8_m": m8, "flops": 2 * m * n * k, "fp8_flops": 2 * m8 * n * k,
                         "bf16_bytes": 2 * n * k, "fp8_bytes": n * k})
    out = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__,
           "measured_at": time.strftime("%Y-%m-%d"), "gemm": rows}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    best16 = max(r["flops"] / r["bf16_seconds"] for r in rows)
    best8 = max(r["fp8_flops"] / r["fp8_seconds"] for r in rows)
    print(json.dumps({"best_bf16_TF": best16 / 1e12, "best_fp8_TF": best8 / 1e12}))


if __name__ == "__main__":
    main()
