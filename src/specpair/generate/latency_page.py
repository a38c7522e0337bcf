"""The site page "How good is the latency model": cross-validated figures first (leave one
source out, per GPU family × engine × drafter family), in-sample second, a held-out set
scored with the stored fits, every point, the sweeps, the fitted parameters with their
bounds, and a predicted-vs-published chart."""

from __future__ import annotations

from specpair.analyse import (
    calibrated_params,
    calibration_data,
    cross_validation,
    evaluation,
    step_fits,
    step_priors,
)
from specpair.analyse.step_params import BOUNDS, DRAFT_BOUNDS
from specpair.facts import calibration_files
from specpair.generate import charts


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "–" if x is None else format(x, fmt)


def _pct1(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}%"


def _pct(a: int, b: int) -> str:
    return f"{a} of {b} ({100 * a / b:.0f}%)" if b else "–"


def _groups(ev: evaluation.Evaluation) -> list[str]:
    out = ["| GPU family × engine × drafter | points | with τ | within ×0.8–×1.25 | "
           "median \\|error\\| of the speedup | baseline points | median \\|error\\| of "
           "baseline tok/s |", "|---|---|---|---|---|---|---|"]
    for g in ev.groups:
        out.append(f"| {g.family} × {g.engine} × {g.drafter} | {g.points} | {g.known_tau} | "
                   f"{_pct(g.within_band, g.known_tau)} | "
                   f"{_pct1(g.median_abs_error_pct)} | {g.baseline_points} | "
                   f"{_pct1(g.baseline_median_abs_error_pct)} |")
    return out


def _summary(ev: evaluation.Evaluation) -> list[str]:
    lo, hi = evaluation.BAND
    sweeps_ok = sum(s.ok for s in ev.sweeps)
    tau_lines = [
        f"- points with a published τ: **{ev.known_tau}**; predicted speedup within "
        f"×{lo}–×{hi} of the published one: **{ev.within_band} "
        f"({100 * ev.share_within:.1f}%)**; they come from {ev.tau_sources} sources, "
        f"{ev.largest_tau_source_points} from {ev.largest_tau_source or '–'}; each source "
        f"weighed the same, {100 * ev.source_mean_within:.1f}% are within",
        f"- median |error| of the speedup: **{ev.median_abs_error_pct}%**; worst case: ratio "
        f"{ev.worst_ratio} ({ev.worst_id})",
    ] if ev.known_tau else ["- points with a published τ: none (no speedup is scored)"]
    return [
        f"- {ev.points} points from {ev.sources} independent sources",
        *tau_lines,
        f"- baseline throughput ({ev.baseline_points} points): median |error| "
        f"**{ev.baseline_median_abs_error_pct}%**, worst ratio {ev.baseline_worst_ratio}; "
        f"counting each published baseline measurement once ({ev.baseline_measurements}), "
        f"median |error| **{ev.baseline_measurements_median_abs_error_pct}%**",
        f"- published speedups the model cannot reach even at full acceptance: "
        f"{ev.beyond_full_acceptance}",
        *([f"- sweeps in their published direction (a depth sweep also with its best depth "
        f"within one step): **{sweeps_ok} of {len(ev.sweeps)}** (a published change within "
        "±5% from the first to the last point counts as flat, i.e. no direction to match); "
        f"sweeps with a step between neighbouring points that the prediction takes the other "
        f"way from a published change of more than ±5%: "
        f"**{sum(1 for s in ev.sweeps if s.against)}** (listed in the sweeps table)"]
          if ev.sweeps else ["- sweeps: none"]),
        f"- refused by name, not predicted (a deployment outside the step model, the same "
        f"refusal a runbook gets, or a measurement one steady batch cannot time): "
        f"**{len(ev.refused)}** points"
        + "".join(f"; {n}: {k}" for n, k in sorted(_refused(ev).items())),
    ]


def _refused(ev: evaluation.Evaluation) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in ev.refused:
        out[r.name] = out.get(r.name, 0) + 1
    return out


def _held_out() -> list[str]:
    """The held-out set scored with the stored fits: its summary, every modelled row and
    its refusals per source."""
    held = calibration_data.load_held_out()
    if not held.points:
        return ["No held-out set is stored."]
    ev = cross_validation.evaluate(held)
    refused: dict[tuple[str, str], int] = {}
    for r in ev.refused:
        refused[(r.name, r.source)] = refused.get((r.name, r.source), 0) + 1
    rows = [f"| {r.id} | {r.source} | {r.gpu} × {r.engine.split()[0]} | {r.target} | "
            f"{r.concurrency} | {_f(r.published_baseline, '.1f')} | "
            f"{_f(r.predicted_baseline, '.1f')} | {_f(r.baseline_ratio, '.3f')} | "
            f"{_f(r.published_speedup)} | {_f(r.predicted_speedup)} |" for r in ev.rows]
    return [
        f"Published measurements collected after the stored fits and kept out of them "
        f"(`src/specpair/data/{calibration_files.HELD_OUT_FILE}`; its header gives the collection "
        "protocol): scored here with the stored fits, they are points the fits have never "
        "seen, from sources none of the fitted points come from. The set is folded into the "
        "fits at the next collection round.",
        "",
        *_summary(ev),
        "",
        "| point | source | GPU × engine | target | concurrency | baseline tok/s | "
        "predicted | ratio | published × | predicted × |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *[f"- refused, {name}: {k} points of {source}"
          for (name, source), k in sorted(refused.items())],
    ]


def page() -> tuple[str, dict[str, bytes]]:
    """The page's Markdown and its chart (file name → SVG bytes)."""
    data = calibration_data.load()
    cv = cross_validation.stored_cross_validation()
    ins = cross_validation.evaluate(mode="in-sample")
    text = "\n".join([
        *_introduction(),
        "## Cross-validated (leave one source out)",
        "",
        *_summary(cv),
        "",
        *_groups(cv),
        "",
        "![Predicted against published speedup](latency-model/predicted-vs-published.svg)",
        "",
        "## In-sample (fitted on every point)",
        "",
        *_summary(ins),
        "",
        *_groups(ins),
        "",
        "## Held out (collected after the fits)",
        "",
        *_held_out(),
        "",
        *_error_bands(data),
        *_fitted_parameters(data),
        *_every_point(cv, ins),
        "## Not modelled",
        "",
        *[f"- point {r.id} ({r.source}): {r.name}: {r.reason}" for r in cv.refused],
        *[f"- {n.source}: {n.reason}" for n in data.not_modelled],
        "",
        *_cross_check(),
        "## Sources",
        "",
        *[f"- {s}" for s in sorted({pt.source_key for pt in data.points})],
        "",
    ])
    return text, {"predicted-vs-published.svg": _chart(cv)}


def _introduction() -> list[str]:
    """The title, what the step model is, and why the accuracy reported first is
    cross-validated."""
    return [
        "# How good is the latency model",
        "",
        "The break-even dial predicts, for a pair on a GPU and an engine, the time of a plain "
        "decode step and of a speculative step (see `src/specpair/analyse/stepmodel.py`): "
        "fixed costs "
        "per forward, per speculative step, per draft forward (per drafter family), per "
        "tensor-parallel all-reduce and per output token, plus (T_mem³ + T_flops³)^(1/3) of "
        "T_mem = bytes / (η_bw · bandwidth) and T_flops = FLOPs / (η_f · peak): a kernel "
        "near its ridge reaches neither roof. The bandwidth is what a published bandwidth "
        "test's fastest reading kernel reaches on the GPU, not its datasheet peak: HBM "
        "reaches 0.86-0.97 of its peak on the measured NVIDIA GPUs and 0.80 on an MI300X, "
        "GDDR 0.98 (data/gpus.yaml; a GPU without a measurement is given the median share "
        "of its vendor's GPUs of the same memory kind, said so), and η_bw is at most the "
        "0.952 of it an H200's decode GEMV measurably reaches. Every parameter is physical "
        "and fitted inside its bounds, per GPU family × engine, on all published points, "
        "unless it was measured on that GPU family (\"Measured parameters\" below). A published "
        "benchmark's steps also carry the prompts of the requests that replace finished ones "
        "(prompt / output tokens of prefill per token a sequence yields, where a point "
        "publishes both lengths; none where prefill runs on other GPUs); a runbook's step "
        "times are decode steps alone. Link figures are datasheet or independently measured "
        "values (`step_links.LINKS`), never tuned on the points scored here.",
        "",
        "**The reported accuracy is cross-validated: leave one source out.** Every point "
        "below is predicted with parameters fitted without any point of its source, so a "
        "source's runs cannot vouch for themselves. The in-sample figures (fitted on "
        "everything, the point included) come second. `python "
        "benchmarks/latency_validation.py` prints the same tables; `--points FILE` "
        "evaluates your own measurements in the same schema with the stored fits.",
        "",
    ]


def _error_bands(data: calibration_data.CalibrationData) -> list[str]:
    """The section on the cross-validated ratio bands every output carries."""
    bands = [f"| {b.family} × {b.engine} × {b.drafter} | {b.quantity} | {b.n} | "
             f"×{b.ratio_lo:.2f} | ×{b.ratio_hi:.2f} |" for b in data.cross_validated]
    return [
        "## Error bands used by every output",
        "",
        "Each predicted speedup, τ*, tokens/s and TPOT carries the interval of its GPU "
        "family × engine × drafter family: the 10th-90th percentile of the cross-validated "
        "predicted / published ratio. With fewer than "
        f"{calibrated_params.MIN_BAND_POINTS} points the band is borrowed from the wider pool and "
        f"widened ×{calibrated_params.WIDEN:g}, and the output says so. A verdict whose SLO lies "
        "inside τ*'s interval reads \"uncertain: measure\"; the planner treats candidates "
        "whose throughput intervals overlap as tied.",
        "",
        "| GPU family × engine × drafter | quantity | points | ratio 10th pct | "
        "ratio 90th pct |",
        "|---|---|---|---|---|",
        *bands,
        "",
    ]


def _fits(data: calibration_data.CalibrationData) -> list[str]:
    """One line per GPU family × engine: its parameters, its per-draft costs, and the
    parameters that ended on a bound with the reason recorded for each."""
    fits = []
    for f in data.fitted:
        drafts = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in sorted(f.draft_s.items()))
        at = "; on a bound: " + "; ".join(
            f"{k} ({v}: {data.bound_reasons.get(f'{f.family} × {f.engine}: {k}', '–')})"
            for k, v in sorted(f.at_bound.items())) if f.at_bound else ""
        fits.append(f"- **{f.family} × {f.engine}**: {f.params.describe()}; per draft forward "
                    f"by drafter family: {drafts or '– (no speculative points with τ)'} "
                    f"(fitted on {len(f.fitted_on)} points){at}")
    return fits


def _fitted_parameters(data: calibration_data.CalibrationData) -> list[str]:
    """The fits, how a family too small to fit is pooled, the measured parameters and
    the bounds every fit stays inside."""
    bounds = [f"| {name} | {b.lo:g} | {b.hi:g} | {b.why} |" for name, b in BOUNDS.items()]
    measured = [f"| {name} | {m.value:g} | {', '.join(m.families)} | {m.why} |"
                for name, m in step_priors.MEASURED.items()]
    bounds += [f"| draft_s ({name}) | {b.lo:g} | {b.hi:g} | {b.why} |"
               for name, b in DRAFT_BOUNDS.items()]
    return [
        "## Fitted parameters",
        "",
        *_fits(data),
        "",
        "Parameters a family's points cannot pin down keep their priors (no all-reduce cost "
        "without tensor-parallel points, no per-token cost without several concurrencies, "
        "no routing locality without a MoE verify). A GPU family with fewer than "
        f"{step_fits.MIN_FIT_POINTS} informative points gets the same engine's fit pooled "
        "across every GPU family (\"pooled\" above: efficiencies are shares of each GPU's "
        "own bandwidth (measured, else assumed and said so) and peaks, which carry the "
        "hardware difference; fixed "
        "costs are the engine's), "
        "and its outputs say so; cross-validated, a source that is its family's only one "
        "is predicted that way.",
        "",
        "### Measured parameters",
        "",
        "A parameter measured outside the published points is taken as measured by the fits "
        "of the GPU families it was measured on, rather than fitted there; elsewhere it is "
        "fitted, pulled to the measurement only weakly, to break ties, as every other "
        "parameter is to its prior.",
        "",
        "| parameter | measured | on GPU families | why |",
        "|---|---|---|---|",
        *measured,
        "",
        "### Bounds",
        "",
        "| parameter | lower | upper | why |",
        "|---|---|---|---|",
        *bounds,
        "",
    ]


def _point_rows(cv: evaluation.Evaluation, ins: evaluation.Evaluation) -> list[str]:
    """Each cross-validated point's row, with its in-sample ratio beside."""
    in_sample = {r.id: r for r in ins.rows}
    rows = []
    for r in cv.rows:
        tau = _f(r.tau) + (" (anchored)" if r.tau_anchored else "")
        own = in_sample[r.id]
        rows.append(f"| {r.id} | {r.source} | {r.gpu} × {r.engine.split()[0]} | {r.target} | "
                    f"{r.shape} | {r.concurrency} | {tau} | {_f(r.published_speedup)} | "
                    f"{_f(r.predicted_speedup)} | {_f(r.ratio, '.3f')} | "
                    f"{_f(own.ratio, '.3f')} | {_f(r.published_baseline, '.1f')} | "
                    f"{_f(r.predicted_baseline, '.1f')} |")
    return rows


def _sweep_rows(cv: evaluation.Evaluation) -> list[str]:
    """Each sweep's published and predicted curve, its direction and the steps where the
    prediction goes against the published change."""
    return [f"| {s.sweep} | {s.kind} | {', '.join(map(str, s.x))} | "
            f"{', '.join(f'{x:.2f}' for x in s.published)} ({s.published_direction}"
            + (f", best {s.published_best}" if s.kind == "depth" else "") + ") | "
            f"{', '.join(f'{x:.2f}' for x in s.predicted)} ({s.predicted_direction}"
            + (f", best {s.predicted_best}" if s.kind == "depth" else "") + ") | "
            f"{'yes' if s.ok else 'NO'} | {'; '.join(s.against) or '–'} |"
            for s in cv.sweeps]


def _every_point(cv: evaluation.Evaluation, ins: evaluation.Evaluation) -> list[str]:
    """The tables of every cross-validated point and every sweep."""
    return [
        "## Every point (cross-validated)",
        "",
        "Ratio = predicted / published speedup, leave-one-source-out; in-sample ratio next "
        "to it. τ *anchored*: the source publishes no τ, so the sweep's first point fixes it "
        "and only the trend is tested.",
        "",
        "| point | source | GPU × engine | target | method | concurrency | τ | published × | "
        "predicted × | ratio | in-sample ratio | baseline tok/s | predicted |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *_point_rows(cv, ins),
        "",
        "## Sweeps (cross-validated)",
        "",
        "| sweep | kind | concurrency or depth | published speedup | predicted speedup | "
        "ok | steps against the published |",
        "|---|---|---|---|---|---|---|",
        *_sweep_rows(cv),
        "",
    ]


def _cross_check() -> list[str]:
    """Why aiconfigurator's kernel tables were tried and not adopted."""
    return [
        "## A cross-check that was not adopted",
        "",
        "NVIDIA's aiconfigurator (0.12.0, PyPI) times forwards from kernel tables it ships "
        "per GPU × engine × version; its speculative model covers MTP (`nextn` with an "
        "assumed acceptance) only, so for these EAGLE-3 points only the baselines compare. "
        "Its baseline throughput came out ×1.15–×1.34 of the published vLLM runs and "
        "×1.37–×6.6 of the SGLang MoE runs (benchmarks/aiconfigurator_crosscheck.py): "
        "kernel tables do not see the per-step and per-token overheads that end-to-end runs "
        "include, and the package is ~850 MB with its dependencies. Not adopted.",
        "",
    ]


def _chart(cv: evaluation.Evaluation) -> bytes:
    """Predicted against published speedup for every point with both, each held out from
    its own fit (leave one source out), marked by whether its source published its τ."""
    published = [(r.published_speedup or 0.0, r.predicted_speedup or 0.0, not r.tau_anchored,
                  True) for r in cv.rows
                 if r.published_speedup is not None and r.predicted_speedup is not None]
    return charts.predicted_vs_published(published)
