"""The calibration data (published measurements) and the model's accuracy against them.

Expected values are the published measurements in src/specpair/data/calibration.yaml,
each with its source; issue 14's Done-when criteria are checked on them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from specpair import calibration, hardware
from specpair.stepmodel import Forward, Hardware, Shape, StepParams, step_times
from tests.conftest import REPO


def test_every_point_names_its_source_gpu_and_models() -> None:
    data = calibration.load()
    assert len(data.points) >= 30
    for pt in data.points:
        assert pt.source and hardware.lookup(pt.gpu) is not None, pt.id
        assert pt.target in data.models and (pt.draft is None or pt.draft in data.models)
        assert pt.published_speedup is not None or pt.baseline_tok_s is not None, pt.id
    assert all(m.source for m in data.models.values())
    assert len({pt.id for pt in data.points}) == len(data.points)


def test_the_stored_fits_are_what_the_fit_points_give() -> None:
    data = calibration.load()
    assert [f.model_dump() for f in calibration.refit(data)] == \
        [f.model_dump() for f in data.fitted]


def test_done_when_predicted_speedups_against_published_ones() -> None:
    ev = calibration.evaluate()
    assert ev.known_tau >= 20
    assert ev.share_within >= 0.8, [(r.id, r.ratio) for r in ev.rows]
    # held out from the fit as well
    assert ev.held_out_within_band / ev.held_out_known_tau >= 0.8
    assert ev.sweeps and all(s.ok for s in ev.sweeps), ev.sweeps
    # the EAGLE-3 paper's RTX 3090 sweep falls, and so does the prediction
    (paper,) = [s for s in ev.sweeps if s.sweep == "eagle3-paper-rtx3090"]
    assert paper.published_direction == paper.predicted_direction == "falling"


def test_batch_one_eagle3_on_h100_is_not_overpredicted() -> None:
    # issue 14: the peak roofline predicted about twice the published batch-1 speedup
    rows = {r.id: r for r in calibration.evaluate().rows}
    for k in range(2, 8):
        r = rows[f"vllm20780-k{k}"]
        assert r.ratio is not None and 0.9 <= r.ratio <= 1.1, (r.id, r.ratio)


def test_the_validation_script_prints_the_table_and_holds() -> None:
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "latency_validation.py")],
                            capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "median |error| of the speedup" in result.stdout
    assert "Done when" in result.stdout and "HOLDS" in result.stdout
    assert result.stdout.count(" validate ") >= 15


def test_break_even_ignores_a_per_token_cost() -> None:
    # paid per token with and without a draft: τ* is where the GPU parts balance
    target, draft = Forward(16e9, 16e9, 1e5), Forward(0.8e9, 0.8e9, 1e5)
    hw = Hardware(3.35e12, 989e12)
    base = StepParams(eta_bw=0.8, eta_flops=0.6, forward_s=1e-3, speculative_s=1e-3,
                      draft_s=5e-4, allreduce_s=2e-5)
    shape = Shape(3, 1, 4, 4)
    a = step_times(target, draft, shape, 16, 500, hw, base)
    b = step_times(target, draft, shape, 16, 500, hw,
                   base.model_copy(update={"token_s": 5e-4}))
    assert a.break_even() == pytest.approx(b.break_even())
    assert a.speedup(3.0) > b.speedup(3.0) > 1.0
