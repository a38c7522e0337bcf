"""How `specpair site` scales with the number of pairs.

Generates N synthetic runbooks (variations of the Qwen3-8B DFlash example, each with its
lock: the tree of benchmarks/build_scale.py), loads them once, and times the page
generation (`site.render`, which plans every pair and draws its charts) three ways:
cold (an empty page cache), warm (nothing changed since the last run), and after one
runbook changed. Reports seconds per pair for N = 10, 100; the goal is linear scaling
and < 0.1 s per pair at N = 100 for a site regenerated after a change.

    python benchmarks/site_scale.py [--sizes 10,100] [--no-cache]
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_scale import make_tree

from specpair import site
from specpair.build import load_pairs


def render(root: Path, cache: Path | None) -> float:
    pairs = load_pairs(root)
    start = time.perf_counter()
    if cache is None or "cache" not in inspect.signature(site.render).parameters:
        site.render(pairs, {})
    else:
        site.render(pairs, {}, cache=cache)
    return time.perf_counter() - start


def measure(n: int, use_cache: bool) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_tree(root, n)
        cache = root / "site" / ".cache" if use_cache else None
        cold = render(root, cache)
        warm = render(root, cache)
        changed = root / "runbooks" / "synthetic-00000" / "runbook.yaml"
        changed.write_text(changed.read_text().replace("min_length: 3.0", "min_length: 3.25"))
        one = render(root, cache)
    return cold, warm, one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100")
    parser.add_argument("--no-cache", action="store_true",
                        help="render without the page cache (every run is cold)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'N':>5} {'cold s/pair':>12} {'warm s/pair':>12} {'1 changed s/pair':>17}")
    per_pair = []
    for n in sizes:
        cold, warm, one = measure(n, not args.no_cache)
        per_pair.append(one / n)
        print(f"{n:>5} {cold / n:>12.3f} {warm / n:>12.3f} {one / n:>17.3f}")
    print(f"scaling: per-pair cost after one change at N={sizes[-1]} is "
          f"{per_pair[-1] / per_pair[0]:.2f}x that at N={sizes[0]} (1.0 = linear)")


if __name__ == "__main__":
    main()
