"""What `specpair plan` costs: candidates, seconds and milliseconds per candidate, per pair.

    python benchmarks/plan_cost.py                 # every example, the runbook's GPU
    python benchmarks/plan_cost.py --gpus common   # every example over the common GPUs
    python benchmarks/plan_cost.py --repeat 3      # best of three runs per pair

For each example pair: the candidate count (deployments × draft shapes, no draft
included), wall time of the whole plan (load excluded), time per candidate, and how the
candidates ended (refused by an engine rule, over budget, without an operating point,
ranked). Then the scaling with the GPU list: the same pair over 1, 2, 3... GPUs of the
common set, to show the cost is linear in the candidates. Exits 1 if any pair takes
10 s or more (issue 20's bound on a 2-core machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from specpair.analyse.plan.options import Options, expand_gpus
from specpair.analyse.plan.search import plan
from specpair.commands.build import load_pairs
from specpair.facts import hardware

ROOT = Path(__file__).resolve().parents[1]
BOUND_S = 10.0


def timed(pair, opts: Options, repeat: int):  # type: ignore[no-untyped-def]
    best = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = plan(pair, opts)
        took = time.perf_counter() - started
        if best is None or took < best[0]:
            best = (took, result)
    assert best is not None
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="", help="comma-separated GPU keys or `common`")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    gpus = expand_gpus([g for g in args.gpus.split(",") if g.strip()])
    pairs = load_pairs(ROOT)
    print("| pair | GPUs | candidates | seconds | ms/candidate | refused | over budget | "
          "no point | ranked | best |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for pair in pairs:
        took, result = timed(pair, Options(gpus=gpus), args.repeat)
        worst = max(worst, took)
        c = result.counts
        best = result.best.key if result.best else "none"
        print(f"| {pair.name} | {', '.join(result.gpus)} | {c.candidates} | {took:.2f} | "
              f"{1e3 * took / c.candidates:.2f} | {c.refused_by_engine} | {c.over_budget} | "
              f"{c.no_operating_point} | {c.ranked} | {best} |")
    common = [g.key for g in hardware.CATALOG.values() if g.common]
    pair = next(p for p in pairs if p.name == "llama31-8b-eagle3") if any(
        p.name == "llama31-8b-eagle3" for p in pairs) else pairs[0]
    print(f"\nScaling ({pair.name}): GPUs in the search → candidates, seconds")
    for n in range(1, len(common) + 1):
        took, result = timed(pair, Options(gpus=tuple(common[:n])), args.repeat)
        print(f"  {n} GPU type(s): {result.counts.candidates} candidates, {took:.2f} s, "
              f"{1e3 * took / result.counts.candidates:.2f} ms each")
    print(f"\nslowest pair: {worst:.2f} s (bound {BOUND_S:g} s)")
    return 0 if worst < BOUND_S else 1


if __name__ == "__main__":
    sys.exit(main())
