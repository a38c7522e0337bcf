"""Routed-expert reads at decode on one GPU: a grouped GEMM over the experts a step's tokens
touch, against a dense GEMV reading the same bytes, for the step model's `moe_bw` (the share
of the dense kernels' bandwidth that expert reads reach).

    python benchmarks/device/grouped_experts_h200.py OUT.json   # CUDA machine with torch

PyTorch's own grouped GEMM (torch._grouped_mm, BF16, CUTLASS on Hopper) stands in for the
engines' fused-MoE kernels, which are not installed there: a proxy, said so wherever its
figures are used. Per expert shape (one TP rank's gate/up slice of DeepSeek-V3 at TP 8 and
of Qwen3-30B-A3B at TP 2) and touched-expert count, each touched expert gets one token (a
group of 16 rows); timing as in roofline_h200.py (CUDA graphs, median of 30, L2 flushed).
"""

from __future__ import annotations

import json
import sys
import time

import torch
from _timing import graphed, timed  # beside this file (run as a script)

SHAPES = {"deepseek-v3-tp8": (256, 7168, 512), "qwen3-30b-a3b-tp2": (128, 2048, 768)}
TOUCHED = [8, 32, 64, 128, 256]


def main() -> None:
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    rows = []
    for name, (experts, k, n) in SHAPES.items():
        w = torch.randn(experts, k, n, dtype=torch.bfloat16, device=dev) / 64
        for touched in (t for t in TOUCHED if t <= experts):
            sub = w[:touched].contiguous()
            dense = sub.reshape(touched * k, n).t().contiguous()  # the same bytes, one matrix
            # one decode token per touched expert, its group padded to 16 rows (the grouped
            # kernel's row alignment); the weights dominate the bytes either way
            tokens, per = 1, 16
            x = torch.randn(touched * per, k, dtype=torch.bfloat16, device=dev)
            offs = torch.arange(per, touched * per + 1, per, dtype=torch.int32, device=dev)
            try:
                grouped = timed(graphed(lambda a=x, b=sub, o=offs: torch._grouped_mm(
                    a, b, offs=o, out_dtype=torch.bfloat16)), flush)
            except Exception as exc:  # record why, keep the others
                grouped = None
                print(f"{name} {touched}: {exc}", file=sys.stderr)
            xd = torch.randn(tokens, touched * k, dtype=torch.bfloat16, device=dev)
            gemv = timed(graphed(lambda a=xd, b=dense: torch.matmul(a, b.t())), flush)
            rows.append({"shape": name, "experts": experts, "k": k, "n": n,
                         "touched": touched, "tokens": tokens, "rows_per_group": per,
                         "bytes": 2 * touched * k * n, "grouped_seconds": grouped,
                         "dense_seconds": gemv})
    with open(sys.argv[1], "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                   "measured_at": time.strftime("%Y-%m-%d"), "rows": rows}, f, indent=1)
    ok = [r for r in rows if r["grouped_seconds"]]
    print(json.dumps({"rows": len(rows), "grouped_ok": len(ok)}))


if __name__ == "__main__":
    main()
