"""What locating validation errors in a large Jsonnet runbook costs.

A hostile pull request can make a runbook evaluate to thousands of unknown keys; every
one is reported with its line and column, found in the Jsonnet source (its output has no
positions). The Qwen3-8B DFlash example is padded with comments to ~900 KB and given N
unknown top-level keys; the script times `load_runbook` (evaluation, validation and
locating every error) and reports ms per located error. Locating was O(N × size) (89 s at
N = 8,000); it is now one index pass over the source plus a lookup per error.

    python benchmarks/locate_cost.py [--sizes 1000,8000] [--bytes 900000]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from specpair.load.runbooks import load_runbook
from specpair.model.errors import SpecpairError

REPO = Path(__file__).resolve().parents[1]


def measure(n: int, size: int) -> tuple[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(REPO / "runbooks", Path(tmp) / "runbooks")
        path = Path(tmp) / "runbooks" / "qwen3-8b-dflash" / "runbook.jsonnet"
        source = path.read_text().rstrip().removesuffix("}")
        keys = "".join(f"  unknown_key_{i}: {i},\n" for i in range(n))
        body = source + keys + "}\n"
        line = "// " + "x" * 97 + "\n"
        path.write_text(line * max(0, (size - len(body)) // len(line)) + body)
        started = time.perf_counter()
        try:
            load_runbook(path)
        except SpecpairError as exc:
            found = len(exc.problems)
        else:
            found = 0
        return found, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,8000")
    parser.add_argument("--bytes", type=int, default=900_000)
    args = parser.parse_args()
    print("| unknown keys | errors located | seconds | ms per error |")
    print("|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        found, seconds = measure(n, args.bytes)
        print(f"| {n:,} | {found:,} | {seconds:.2f} | {1000 * seconds / max(found, 1):.3f} |")


if __name__ == "__main__":
    main()
