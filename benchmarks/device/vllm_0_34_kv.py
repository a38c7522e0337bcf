"""vLLM 0.34.0 on one GPU, in both KV sizing modes, against specpair's budget of the same pair.

    python benchmarks/device/vllm_0_34_kv.py OUT.json [RUNBOOK] [--tensor 1]

Needs a CUDA machine with `vllm==0.34.0` and specpair installed, and the pair's checkpoints
in the local Hugging Face cache (it runs with HF_HUB_OFFLINE=1). RUNBOOK defaults to the
example pinned to vLLM 0.34.0 (runbooks/llama33-70b-eagle3-vllm-0-34-0); a 70B target needs
TP 4, so on one GPU pass a runbook whose pair fits it (the pair is moved to vllm 0.34.0,
TP `--tensor`, and each mode, by `specpair.analyse.plan.variant`).

For each mode the generated speculative command is started as specpair writes it, and the
engine's own start-up line "KV cache size: N tokens" (v1/core/kv_cache_utils.py:1169) is
read, then the server is stopped:

- pinned: the engine allocates the --kv-cache-memory-bytes specpair passes; its capacity
  must equal the budget's `max_total_tokens` (checked on the CPU by the KV oracle with
  0.34.0's planner; this is the same claim through the whole start-up);
- measured: the engine sizes the cache from memory it measures after warmup; the budget's
  estimate and interval are recorded beside the engine's figure, and whether the figure
  lies in the interval (what `specpair staging ingest` of this log would then replace).

Not run here: no GPU on the development machines. The result JSON records both modes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from specpair.analyse.launch import EnvRef, build_for
from specpair.analyse.plan.variants import variant
from specpair.commands.build import load_pairs

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "llama33-70b-eagle3-vllm-0-34-0"
CAPACITY = re.compile(r"KV cache size: ([\d,]+) tokens")
READY = "Application startup complete"
START_TIMEOUT_S = 1800


def serve(argv: list[str], log: Path) -> int | str:
    """Starts the command, returns the capacity the engine logs (or why there is none)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                text = log.read_text(errors="replace")
                found = CAPACITY.search(text)
                if found and READY in text:
                    return int(found.group(1).replace(",", ""))
                if proc.poll() is not None:
                    return f"exited {proc.returncode} before reporting: {text[-2000:]}"
                time.sleep(5)
            return "timed out"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=120)


def main() -> None:
    out = Path(sys.argv[1])
    name = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else EXAMPLE
    tensor = int(sys.argv[sys.argv.index("--tensor") + 1]) if "--tensor" in sys.argv else 1
    (pair,) = [p for p in load_pairs(REPO) if p.name == name]
    results: dict[str, Any] = {"pair": name, "tensor": tensor, "modes": {}}
    for mode in ("pinned", "measured"):
        moved = variant(pair, {("engine", "name"): "vllm", ("engine", "version"): "0.34.0",
                               ("deployment", "parallel", "tensor"): tensor,
                               ("deployment", "kv_cache_sizing"): mode})
        launch = build_for(moved)
        if launch.errors:
            results["modes"][mode] = {"refused": [e.message for e in launch.errors]}
            continue
        budget = moved.release.budget(moved, moved.gpu_spec)
        scenario = budget.speculative or budget.baseline
        argv = [a.name if isinstance(a, EnvRef) else a for a in launch.argv]
        engine = serve(argv, out.with_suffix(f".{mode}.log"))
        row: dict[str, Any] = {"argv": argv, "engine_tokens": engine,
                               "budget_tokens": scenario.max_total_tokens,
                               "budget_estimate": scenario.capacity_estimate}
        if isinstance(engine, int):
            if mode == "pinned":
                row["exact"] = engine == scenario.max_total_tokens
            elif scenario.capacity_estimate is not None:
                low, high = (int(x) for x in scenario.capacity_estimate.split("–"))
                row["within_interval"] = low <= engine <= high
        results["modes"][mode] = row
        print(mode, json.dumps({k: v for k, v in row.items() if k != "argv"}), flush=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
