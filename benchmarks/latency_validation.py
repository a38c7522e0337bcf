"""How good is the latency model: cross-validated, then in-sample, on every published point.

    python benchmarks/latency_validation.py                 # leave-one-source-out, then in-sample
    python benchmarks/latency_validation.py --stored        # the same, from the stored evaluation
    python benchmarks/latency_validation.py --refit --write # refit, store fits and error bands
                                                            # (tools/refit_calibration.py)
    python benchmarks/latency_validation.py --points FILE [--json]
                                                            # your own points, stored fits
    python benchmarks/latency_validation.py --points src/specpair/data/held_out_points.yaml
                                                            # the held-out set, stored fits

Leave-one-source-out: every point is predicted with parameters fitted without any point of
its source. The summary leads with those figures per GPU family × engine × drafter family
(share of points with a published τ within ×0.8–×1.25, median |error| of the speedup and
of baseline throughput, every sweep's direction and a depth sweep's best depth), then the
same with the stored fits (in-sample). `--points FILE` evaluates a file in the calibration
points schema with the stored fits, without refitting, and prints the same table and
summary. Exits 1 when the Done-when criteria do not hold on the leading figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/

from tools.refit_calibration import write_fits

from specpair.analyse import (
    acceptance_fits,
    calibration_data,
    cross_validation,
    evaluation,
    published_points,
    step_fits,
)


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "–" if x is None else format(x, fmt)


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "–"


def report(ev: evaluation.Evaluation, rows: bool = True) -> None:
    print(f"== {ev.mode}: {ev.points} points from {ev.sources} sources ==")
    print(f"{'GPU family × engine × drafter':36} {'points':>6} {'τ known':>7} "
          f"{'in ×0.8–×1.25':>15} {'median |err| S':>14} {'base pts':>8} {'median |err| base':>17}")
    for g in ev.groups:
        print(f"{g.family + ' × ' + g.engine + ' × ' + g.drafter:36} {g.points:>6} "
              f"{g.known_tau:>7} {_pct(g.within_band, g.known_tau):>15} "
              f"{_f(g.median_abs_error_pct, '.1f'):>14} {g.baseline_points:>8} "
              f"{_f(g.baseline_median_abs_error_pct, '.1f'):>17}")
    if rows:
        print()
        print(f"{'point':32} {'source':28} {'c':>4} {'depth':>5} {'τ':>6} {'S pub':>6} "
              f"{'S pred':>6} {'ratio':>6} {'base pub':>9} {'base pred':>9} params")
        for r in ev.rows:
            tau = _f(r.tau) + ("*" if r.tau_anchored else "")
            print(f"{r.id[:32]:32} {r.source[:28]:28} {r.concurrency:>4} {r.depth:>5} "
                  f"{tau:>6} {_f(r.published_speedup):>6} {_f(r.predicted_speedup):>6} "
                  f"{_f(r.ratio, '.3f'):>6} {_f(r.published_baseline, '.1f'):>9} "
                  f"{_f(r.predicted_baseline, '.1f'):>9} {r.params}")
        print("\n* τ anchored: the sweep's first point fixes τ (not published); only the "
              "trend is tested there.")
    print()
    for s in ev.sweeps:
        best = (f"; best depth published {s.published_best}, predicted {s.predicted_best}"
                if s.kind == "depth" else "")
        print(f"{s.kind} sweep {s.sweep}: {s.x} published {s.published} "
              f"({s.published_direction}), predicted {s.predicted} ({s.predicted_direction})"
              f"{best} → {'ok' if s.ok else 'WRONG'}"
              + "".join(f"\n    step against the published: {a}" for a in s.against))
    if ev.known_tau:
        print(f"\npoints with a published τ: {ev.known_tau}; within ×{evaluation.BAND[0]}–"
              f"×{evaluation.BAND[1]}: {ev.within_band} ({100 * ev.share_within:.1f}%)")
        print(f"  from {ev.tau_sources} sources, {ev.largest_tau_source_points} of them from "
              f"{ev.largest_tau_source or '–'}; each source weighed the same: "
              f"{100 * ev.source_mean_within:.1f}% within")
        print(f"median |error| of the speedup: {ev.median_abs_error_pct}%; worst ratio "
              f"{ev.worst_ratio} ({ev.worst_id})")
    else:  # no figure rather than a 0.0% that reads as a perfect score
        print("\npoints with a published τ: none (no speedup is scored)")
    print(f"baseline throughput: {ev.baseline_points} points, median |error| "
          f"{ev.baseline_median_abs_error_pct}%, worst ratio {ev.baseline_worst_ratio}")
    print(f"  each published baseline measurement once: {ev.baseline_measurements}, median "
          f"|error| {ev.baseline_measurements_median_abs_error_pct}%")
    print(f"published speedups above the model's at full acceptance: "
          f"{ev.beyond_full_acceptance}")
    print(f"sweeps in their published direction (depth sweeps: best depth within one step): "
          f"{sum(s.ok for s in ev.sweeps)} of {len(ev.sweeps)}; with a step between "
          f"neighbouring points taken the other way: "
          f"{sum(1 for s in ev.sweeps if s.against)}")
    # per refusal, its sources and how many of each one's points: a source refused whole
    # (a lab page of burst runs) would otherwise list dozens of ids on one line
    names: dict[str, dict[str, int]] = {}
    for r in ev.refused:
        per_source = names.setdefault(r.name, {})
        per_source[r.source] = per_source.get(r.source, 0) + 1
    print(f"refused by name (not modelled, not predicted): {len(ev.refused)} points" + "".join(
        f"; {n}: {sum(srcs.values())} ("
        + ", ".join(f"{src} ×{k}" for src, k in sorted(srcs.items())) + ")"
        for n, srcs in sorted(names.items())))


def _json(ev: evaluation.Evaluation) -> dict[str, object]:
    out = ev.model_dump(mode="json", exclude={"fits"})
    out["share_within"] = round(ev.share_within, 4)
    out["passes"] = ev.passes
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--points", type=Path, help="a points file (calibration schema) to "
                        "evaluate with the stored fits, without refitting")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--refit", action="store_true",
                        help="refit every GPU family × engine on the points marked fit")
    parser.add_argument("--write", action="store_true", help="with --refit: store the fits "
                        "and cross-validated error bands in this repository's "
                        "src/specpair/data (tools/refit_calibration.py)")
    parser.add_argument("--quiet", action="store_true", help="summaries only, no point rows")
    parser.add_argument("--stored", action="store_true",
                        help="report the cross-validated figures the package stores "
                             "(data/cross_validation.json, which the tests check against a "
                             "fresh computation) instead of refitting every source (minutes)")
    args = parser.parse_args()
    if args.stored and (args.refit or args.points is not None):
        parser.error("--stored reports the package's stored evaluation: not with --refit "
                     "or --points")
    started = time.perf_counter()
    if args.points is not None:
        try:
            data = calibration_data.load_points(args.points)
        except (OSError, published_points.CalibrationError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        ev = cross_validation.evaluate(data)
        if args.json:
            print(json.dumps(_json(ev), indent=1, sort_keys=True))
        else:
            report(ev, rows=not args.quiet)
            print(f"\n({len(data.points)} points evaluated in "
                  f"{time.perf_counter() - started:.2f} s with the stored fits)")
        return 0 if ev.passes else 1
    data = calibration_data.load()
    if args.refit:
        fits = step_fits.refit(data)
        data = data.model_copy(update={"fitted": fits})
    cv = (cross_validation.stored_cross_validation() if args.stored
          else cross_validation.cross_validate(data))
    ins = cross_validation.evaluate(data, mode="in-sample")
    if args.refit and args.write:
        write_fits(data.fitted, cross_validation.error_bands(cv), cv)
    if args.json:
        print(json.dumps({"cross_validated": _json(cv), "in_sample": _json(ins)}, indent=1,
                         sort_keys=True))
        return 0 if cv.passes else 1
    for f in data.fitted:
        at = (", on a bound: " + ", ".join(f"{k} ({v})" for k, v in sorted(f.at_bound.items()))
              if f.at_bound else "")
        drafts = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in sorted(f.draft_s.items()))
        print(f"{f.family} × {f.engine}: {f.params.describe()}; per draft forward by drafter: "
              f"{drafts or '–'} (fitted on {len(f.fitted_on)} points{at})")
    for drafter in acceptance_fits.FEATURE_DRIFT_FAMILIES:
        d = acceptance_fits.fit_position_decay(data.points, drafter)
        print(f"acceptance × {drafter}: later positions at δ = {d.decay:.3f} × the first's "
              f"(fitted on {len(d.sweeps)} depth sweeps with a published τ"
              f"{', on its ' + d.at_bound + ' bound' if d.at_bound else ''})")
    t = acceptance_fits.fit_sibling_acceptance(data.points)
    print(f"acceptance × SGLang trees: a rank-r candidate at ρ = {t.sibling:.3f} × rank r − 1's "
          f"(fitted on {len(t.groups)} groups of tree shapes with a published τ"
          f"{', on its ' + t.at_bound + ' bound' if t.at_bound else ''})")
    print()
    report(cv, rows=not args.quiet)
    print()
    report(ins, rows=False)
    elapsed = time.perf_counter() - started
    print(f"\nDone when (leave-one-source-out: ≥80% within the band, baseline median "
          f"|error| ≤ 12% over each published baseline measurement once, every sweep's "
          f"direction and best depth): "
          f"{'HOLDS' if cv.passes else 'DOES NOT HOLD'}  ({elapsed:.1f} s; "
          f"{1e3 * elapsed / max(cv.points, 1):.1f} ms per point, all fits included)")
    return 0 if cv.passes else 1


if __name__ == "__main__":
    raise SystemExit(main())
