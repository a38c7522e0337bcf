"""How good is the latency model: predicted vs published speedup for every calibration point.

    python benchmarks/latency_validation.py           # with the fitted parameters on file
    python benchmarks/latency_validation.py --refit   # refit on the `fit` points first

Prints one row per published point (ratio = predicted / published), the summary (median
|error|, worst case, share within ×0.8–×1.25 for points with a published τ, held-out
share), every concurrency sweep's published and predicted direction, and whether issue
14's Done-when criteria hold. Exits 1 when they do not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from specpair import calibration


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "–" if x is None else format(x, fmt)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refit", action="store_true",
                        help="refit every GPU family × engine on the points marked fit")
    parser.add_argument("--write", action="store_true",
                        help="with --refit: store the fits in src/specpair/data/calibration.yaml")
    args = parser.parse_args()
    data = calibration.load()
    fits = calibration.refit(data) if args.refit else None
    ev = calibration.evaluate(data, fits)
    if args.refit and args.write and fits is not None:
        calibration.write_fits(fits)
    for f in ev.fits:
        print(f"{f.family} × {f.engine}: {f.params.describe()} (fitted on {len(f.fitted_on)} "
              "points)")
    print()
    print(f"{'point':30} {'role':8} {'c':>4} {'τ':>6} {'S pub':>6} {'S pred':>6} "
          f"{'ratio':>6} {'base pub':>9} {'base pred':>9} params")
    for r in ev.rows:
        tau = _f(r.tau) + ("*" if r.tau_anchored else "")
        print(f"{r.id:30} {r.role:8} {r.concurrency:>4} {tau:>6} "
              f"{_f(r.published_speedup):>6} {_f(r.predicted_speedup):>6} "
              f"{_f(r.ratio, '.3f'):>6} {_f(r.published_baseline, '.1f'):>9} "
              f"{_f(r.predicted_baseline, '.1f'):>9} {r.params}")
    print("\n* τ anchored: the sweep's lowest concurrency fixes τ (not published); only the "
          "trend is tested there.\n")
    for s in ev.sweeps:
        print(f"sweep {s.sweep}: c {s.concurrencies} published {s.published} "
              f"({s.published_direction}), predicted {s.predicted} ({s.predicted_direction})"
              f" → {'ok' if s.ok else 'WRONG DIRECTION'}")
    print(f"\npoints with a published τ: {ev.known_tau}; within ×{calibration.BAND[0]}–"
          f"×{calibration.BAND[1]}: {ev.within_band} ({100 * ev.share_within:.0f}%); "
          f"held out: {ev.held_out_within_band} of {ev.held_out_known_tau}")
    print(f"median |error| of the speedup: {ev.median_abs_error_pct}%; worst ratio "
          f"{ev.worst_ratio} ({ev.worst_id}); median |error| of baseline throughput: "
          f"{ev.baseline_median_abs_error_pct}%")
    print(f"Done when (≥80% within the band, every sweep's direction): "
          f"{'HOLDS' if ev.passes else 'DOES NOT HOLD'}")
    return 0 if ev.passes else 1


if __name__ == "__main__":
    raise SystemExit(main())
