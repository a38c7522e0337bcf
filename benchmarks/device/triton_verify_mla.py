"""The verify attention of SGLang v0.4.3.post4-v0.4.4.post1's default MLA backend, timed on
one GPU: its Triton extend kernel (one program per sequence and query head, each walking
the whole cached prefix, BLOCK_M 32 rows for the w verified tokens) against the same
release's grouped decode kernel (each KV tile read once for all heads) at the same batch
and context.

    python benchmarks/device/triton_verify_mla.py OUT.json TRITON_OPS_DIR

TRITON_OPS_DIR is `sglang/srt/layers/attention/triton_ops/` unpacked from the release's own
wheel (`pip download --no-deps sglang==0.4.4`, then unzip): the kernels are SGLang's, run
as released, never copied here. The device machine reaches no package index: unpack it
into an ignored folder of the checkout (e.g. build/sglang-0.4.4/) and carry that folder.
Their two imports from the rest of SGLang (`is_hip`, and `context_attention_fwd`, which the
extend path does not call) are stood in for below.

What it is for: data/published_points.yaml refuses SGLang's DeepSeek-V3 docs sweep
(`PER_HEAD_VERIFY`) because the step model's one-pass attention does not cost this kernel;
with these times per layer the verify's attention can be charged as measured. Shapes: one
TP-8 rank of DeepSeek-V3 (16 query heads, one 576-wide latent KV head, 512-wide values),
BF16 KV, w = 4 verified tokens per sequence (3/1/4), a chain mask as the EAGLE worker
builds it; contexts 1,000 and 2,000; timing as in roofline_h200.py (CUDA graphs, median of
30, L2 flushed before each call). The Triton the device has compiles the kernels, not
v0.4.4's Triton 3.1: its version is recorded with the times. The arguments as built here
were checked against plain softmax attention in Triton's interpreter (TRITON_INTERPRET=1,
CPU tensors, batch 2, context 70): both kernels agree to 1e-6.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch
import triton
from _timing import graphed, timed  # beside this file (run as a script)

HEADS, LATENT, ROPE = 16, 512, 64
VERIFY = 4
BATCHES = [1, 8, 16, 32]
CONTEXTS = [1000, 2000]
KV_SPLITS = 8  # server_args.triton_attention_num_kv_splits in v0.4.4 (CUDA)


def _load(ops: Path, name: str) -> types.ModuleType:
    """One of the release's triton_ops modules, its SGLang imports stood in for."""
    utils = types.ModuleType("sglang.srt.utils")
    utils.is_hip = lambda: False  # type: ignore[attr-defined]
    prefill = types.ModuleType("sglang.srt.layers.attention.triton_ops.prefill_attention")
    prefill.context_attention_fwd = None  # type: ignore[attr-defined]
    for mod in ("sglang", "sglang.srt", "sglang.srt.layers", "sglang.srt.layers.attention",
                "sglang.srt.layers.attention.triton_ops"):
        sys.modules.setdefault(mod, types.ModuleType(mod))
    sys.modules["sglang.srt.utils"] = utils
    sys.modules[prefill.__name__] = prefill
    spec = importlib.util.spec_from_file_location(f"v044_{name}", ops / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time_shape(extend: Callable[..., None], decode: Callable[..., None], batch: int,
                context: int, flush: torch.Tensor) -> dict[str, float | int]:
    dev = flush.device
    scale = (LATENT + ROPE) ** -0.5
    slots = batch * (context + VERIFY)
    # the MLA pool: one 576-wide latent per token; the values are its first 512
    k_buffer = torch.randn(slots, 1, LATENT + ROPE, dtype=torch.bfloat16, device=dev)
    v_buffer = k_buffer[..., :LATENT]
    # a sequence's prefix scattered over the pool, as pages are after a while
    kv_indices = torch.randperm(slots, device=dev)[:batch * context].to(torch.int32)
    kv_indptr = torch.arange(0, batch * context + 1, context, dtype=torch.int32, device=dev)
    # verify: w query rows per sequence, their own K/V, a chain mask over them
    qo_indptr = torch.arange(0, batch * VERIFY + 1, VERIFY, dtype=torch.int32, device=dev)
    q = torch.randn(batch * VERIFY, HEADS, LATENT + ROPE, dtype=torch.bfloat16, device=dev)
    k_new = torch.randn(batch * VERIFY, 1, LATENT + ROPE, dtype=torch.bfloat16, device=dev)
    v_new = k_new[..., :LATENT].contiguous()
    o = torch.empty(batch * VERIFY, HEADS, LATENT, dtype=torch.bfloat16, device=dev)
    per_seq = torch.ones(VERIFY, context + VERIFY, dtype=torch.bool, device=dev)
    per_seq[:, context:] = torch.tril(per_seq[:, context:])
    # uint8, as the release's CUDA-graph runner holds the mask (cuda_graph_custom_mask)
    mask = per_seq.flatten().repeat(batch).to(torch.uint8)
    mask_indptr = torch.arange(0, batch * per_seq.numel() + 1, per_seq.numel(),
                               dtype=torch.int64, device=dev)
    verify_s = timed(graphed(lambda: extend(
        q, k_new, v_new, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, mask,
        mask_indptr, VERIFY, scale, 0.0)), flush)
    # decode: one query row per sequence over the same prefix
    qd = torch.randn(batch, HEADS, LATENT + ROPE, dtype=torch.bfloat16, device=dev)
    od = torch.empty(batch, HEADS, LATENT, dtype=torch.bfloat16, device=dev)
    logits = torch.empty(batch, HEADS, KV_SPLITS, LATENT + 1, dtype=torch.float32,
                         device=dev)
    decode_s = timed(graphed(lambda: decode(
        qd, k_buffer, v_buffer, od, kv_indptr, kv_indices, logits, KV_SPLITS, scale,
        0.0)), flush)
    return {"batch": batch, "context": context, "verify_tokens": VERIFY, "heads": HEADS,
            "kv_bytes_per_token": 2 * (LATENT + ROPE), "verify_seconds": verify_s,
            "decode_seconds": decode_s}


def main() -> None:
    out, ops = sys.argv[1], Path(sys.argv[2])
    extend = _load(ops, "extend_attention").extend_attention_fwd
    decode = _load(ops, "decode_attention").decode_attention_fwd
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    rows = []
    for context in CONTEXTS:
        for batch in BATCHES:
            rows.append(_time_shape(extend, decode, batch, context, flush))
            print(json.dumps(rows[-1]))
    with open(out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                   "triton": triton.__version__, "kernels": str(ops),
                   "measured_at": time.strftime("%Y-%m-%d"), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
