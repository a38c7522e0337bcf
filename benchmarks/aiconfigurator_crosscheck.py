"""Cross-check: NVIDIA aiconfigurator's decode-step estimate against published baselines.

Not a dependency of specpair. Run it in a scratch environment:

    python -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12.0
    /tmp/aic/bin/python benchmarks/aiconfigurator_crosscheck.py

aiconfigurator times forwards from kernel tables it ships per GPU × engine × version
(`cli_estimate`, mode static_gen). Its speculative model covers MTP (`nextn` with an
assumed acceptance) only, so of the calibration points only the baselines can be
compared. Result on 2026-11-30 (aiconfigurator 0.12.0), predicted / published
baseline tok/s:

    gist-c1 1.257, gist-c8 1.292, gist-c32 1.343      (Qwen3-8B, H100, vLLM)
    vllm20780 1.151                                    (Llama-3.1-8B, H100, vLLM)
    tengyunw-h200 1.062                                (Qwen3-8B, H200, SGLang)
    angelslim163 c1 1.593, c8 2.436, c64 6.553         (Qwen3-30B-A3B, 4× H100, SGLang)
    specforge339-c1 1.370                              (Qwen3-30B-A3B, 2× H100, SGLang)

against specpair's fitted model (benchmarks/latency_validation.py): median |error| of the
baseline throughput 6.8%, of the speedup 3.3%. Kernel tables do not see the engines'
per-step and per-token overheads that these end-to-end runs include, which is what the
break-even dial needs; and the package (with pandas, pyarrow, plotly, bokeh) is ~850 MB.
Not adopted.
"""

from __future__ import annotations

import time

CASES = [  # label, model, system, backend, tp, batch, isl, osl, published tok/s
    ("gist-c1", "Qwen/Qwen3-8B", "h100_sxm", "vllm", 1, 1, 512, 1024, 125),
    ("gist-c8", "Qwen/Qwen3-8B", "h100_sxm", "vllm", 1, 8, 512, 1024, 898),
    ("gist-c32", "Qwen/Qwen3-8B", "h100_sxm", "vllm", 1, 32, 512, 1024, 2726),
    ("vllm20780", "meta-llama/Meta-Llama-3.1-8B", "h100_sxm", "vllm", 1, 1, 100, 400, 141.44),
    ("angelslim163-c1", "Qwen/Qwen3-30B-A3B", "h100_sxm", "sglang", 4, 1, 200, 600, 218.89),
    ("angelslim163-c8", "Qwen/Qwen3-30B-A3B", "h100_sxm", "sglang", 4, 8, 200, 600, 677.14),
    ("angelslim163-c64", "Qwen/Qwen3-30B-A3B", "h100_sxm", "sglang", 4, 64, 200, 600, 1237.84),
    ("specforge339-c1", "Qwen/Qwen3-30B-A3B", "h100_sxm", "sglang", 2, 1, 200, 600, 222.47),
    ("tengyunw-h200", "Qwen/Qwen3-8B", "h200_sxm", "sglang", 1, 1, 200, 600, 187),
]


def main() -> None:
    from aiconfigurator.cli.api import cli_estimate  # type: ignore[import-not-found]

    for label, model, system, backend, tp, batch, isl, osl, published in CASES:
        moe = "A3B" in model
        start = time.time()
        result = cli_estimate(model, system, mode="static_gen", backend_name=backend,
                              isl=isl, osl=osl, batch_size=batch, tp_size=tp,
                              moe_tp_size=tp if moe else None, moe_ep_size=1 if moe else None)
        predicted = batch * 1000.0 / result.tpot
        print(f"{label:18} published {published:8.1f} predicted {predicted:8.1f} "
              f"ratio {predicted / published:.3f} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
