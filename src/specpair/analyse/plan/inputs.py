"""What a plan reads besides its candidates: the workloads' mean prompt and output
lengths, and the step model's cross-validated error on the pair's GPU family and engine."""

from __future__ import annotations

from typing import Literal

from specpair.analyse import calibrated_params, calibration_data
from specpair.analyse.step_inputs import workload_lengths
from specpair.analyse.stepmodel import drafter_family
from specpair.model.errors import SpecpairError
from specpair.model.runbook import Workload
from specpair.resolve.pair import ResolvedPair


def validation(family: str | None, engine: str, method: str | None
               ) -> tuple[float | None, str]:
    """The step model's cross-validated (leave-one-source-out) error on this GPU family ×
    engine × drafter family, and the sentence saying where it comes from."""
    drafter = drafter_family(method) if method else "none"
    quantity: Literal["speedup", "throughput"] = "speedup" if method else "throughput"
    band = calibrated_params.interval(family, engine, drafter, quantity)
    own = next((b for b in calibration_data.load().cross_validated
                if (b.family, b.engine, b.drafter, b.quantity)
                == (family, engine, "none" if quantity == "throughput" else drafter,
                    quantity)), None)
    pct = own.median_abs_error_pct if own is not None and not band.few else None
    return pct, (f"{quantity} ×{band.ratio_lo:.2f}–×{band.ratio_hi:.2f} "
                 f"(predicted / published, 10th-90th percentile): {band.label}")


def _synthetic(pair: ResolvedPair) -> list[Workload]:
    """The generated workloads (replay files are read by `specpair bench` only)."""
    return [w for w in pair.runbook.workloads if w.kind != "replay"]


def mean_prompt_tokens(pair: ResolvedPair) -> int:
    lengths = [x for w in _synthetic(pair) if (x := workload_lengths(w)) is not None]
    if not lengths:  # the split of prompt and answer is not guessed
        raise SpecpairError.single(pair.source_file, "the plan needs a synthetic workload "
                                   "for the split of prompt and answer tokens; this runbook "
                                   "has replay workloads only", "add a short-homogeneous or "
                                   "long-diverse workload sized like the replayed traffic")
    # each workload weighs as one, as in the expected context (`expected_context`)
    return max(1, round(sum(x[0] for x in lengths) / len(lengths)))


def mean_output_tokens(pair: ResolvedPair) -> float:
    ws = [x[1] for w in _synthetic(pair) if (x := workload_lengths(w)) is not None]
    return sum(ws) / max(1, len(ws))
