"""How the build pipeline scales with the number of runbooks.

Generates N synthetic runbooks (variations of the Qwen3-8B DFlash example, each with its
lock) in a scratch tree and times the pipeline's own work: load → validate → resolve →
generate → write, then a second build that only compares (the `check` path). Reports the
cost per runbook for N = 10, 100, 1000; the goal is linear scaling and < 10 ms per runbook.

    python benchmarks/build_scale.py [--sizes 10,100,1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from specpair.commands.build import build

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = """\
# yaml-language-server: $schema=../../schema/runbook.schema.json
pair: {{name: {name}, title: Synthetic pair {i}, owner: bench}}
engine: {{name: sglang, version: 0.5.23}}
target: {{repo: Qwen/Qwen3-8B, revision: main, dtype: bfloat16}}
draft: {{repo: z-lab/Qwen3-8B-DFlash-b16, revision: main}}
speculation: {{method: DFLASH, block_size: 16}}
deployment:
  gpu: {gpu}
  parallel: {{tensor: {tp}}}
  memory_fraction: 0.{frac}
  context_length: {ctx}
  max_running_requests: {mrr}
acceptance: {{slo: {{min_length: 3.0, basis: provisional}}}}
codesign: {{feature_layers: [1, 9, 17, 25, 33], block_size: 16}}
"""


def make_tree(root: Path, n: int) -> None:
    lock = json.loads((REPO / "runbooks" / "qwen3-8b-dflash" / "lock.json").read_text())
    for i in range(n):
        name = f"synthetic-{i:05d}"
        folder = root / "runbooks" / name
        folder.mkdir(parents=True)
        (folder / "runbook.yaml").write_text(TEMPLATE.format(
            name=name, i=i, gpu=("H100-80GB", "H200-141GB")[i % 2], tp=(1, 2, 4)[i % 3],
            frac=80 + i % 10, ctx=4096 * (1 + i % 8), mrr=16 + i % 48))
        (folder / "lock.json").write_text(json.dumps({**lock, "pair": name}))


def measure(n: int, repeat: int) -> tuple[float, float]:
    best_build = best_check = float("inf")
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            make_tree(root, n)
            start = time.perf_counter()
            build(root)
            best_build = min(best_build, time.perf_counter() - start)
            start = time.perf_counter()
            result = build(root, check_only=True)
            best_check = min(best_check, time.perf_counter() - start)
            assert not result.drift.stale
            shutil.rmtree(root / "runbooks")
    return best_build, best_check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'N':>6} {'build s':>9} {'ms/runbook':>11} {'check s':>9} {'ms/runbook':>11}")
    per_item = []
    for n in sizes:
        built, checked = measure(n, args.repeat)
        per_item.append(built / n)
        print(f"{n:>6} {built:>9.3f} {built / n * 1e3:>11.2f} {checked:>9.3f} "
              f"{checked / n * 1e3:>11.2f}")
    print(f"scaling: per-runbook cost at N={sizes[-1]} is {per_item[-1] / per_item[0]:.2f}x "
          f"that at N={sizes[0]} (1.0 = linear)")


if __name__ == "__main__":
    main()
