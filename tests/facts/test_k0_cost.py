"""What a schedule's K = 0 range costs (data/k0_cost.yaml, issue 53 item 4).

The expected numbers are the published ones, not specpair's arithmetic restated:
seongyun1104/depthchart ctx_tax_mechanism/RESULTS.md at a346d23, section 1 (vLLM 0.27.1,
V1 runner, 1x H100 NVL, gemma-4-31B-it-qat-FP8 with its q4_0 assistant drafter), whose
context-400 cells are also posted in vllm-project/vllm#49548 (2026-08-24): TPOT with a
schedule that never drafts against the same server without a speculative config.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from specpair.facts import k0_cost
from specpair.facts.k0_cost import K0Point

# (context, concurrency) → (no-spec TPOT ms, K = 0 TPOT ms, published tax %), as printed
PUBLISHED = {
    (400, 2): (14.374, 15.317, 6.56),      # also in vllm#49548
    (38000, 2): (15.945, 16.975, 6.46),
    (4000, 26): (27.218, 28.945, 6.34),
    (16000, 6): (17.713, 18.546, 4.70),
    (400, 189): (77.164, 93.820, 21.58),   # also in vllm#49548
}


def test_the_vllm_points_are_the_published_cells() -> None:
    m = k0_cost.measurements()["vllm"]
    assert m.release == "0.27.1" and "H100 NVL" in m.gpu
    assert {(p.context, p.concurrency): (p.no_spec_tpot_ms, p.k0_tpot_ms, p.tax_pct)
            for p in m.points} == PUBLISHED
    assert "depthchart/blob/a346d23" in m.url
    assert any("vllm-project/vllm/issues/49548" in a for a in m.also)


def test_the_calibrated_cost_spans_the_published_interval() -> None:
    cost = k0_cost.cost("vllm")
    assert cost is not None
    # the smallest and largest published tax: +4.70 % (16k context, 6 running) and
    # +21.58 % (400 context, 189 running)
    assert cost.low == pytest.approx(0.0470) and cost.high == pytest.approx(0.2158)
    assert cost.concurrencies == (2, 189)
    # a K = 0 step's TPOT against the target alone's: the published 93.820 / 77.164 ms and
    # 18.546 / 17.713 ms, to the published rounding
    assert cost.slowdown("high") == pytest.approx(93.820 / 77.164, abs=1e-4)
    assert cost.slowdown("low") == pytest.approx(18.546 / 17.713, abs=1e-4)
    assert cost.label.startswith("K = 0 cost: +4.7%–21.6% TPOT against the target alone")
    assert "vllm 0.27.1's V1 model runner" in cost.label and cost.url in cost.label


def test_a_misprinted_tax_is_refused() -> None:
    with pytest.raises(ValidationError, match="does not match the TPOTs"):
        K0Point(context=400, concurrency=2, no_spec_tpot_ms=14.374, k0_tpot_ms=15.317,
                tax_pct=7.56)


def test_an_engine_without_a_measurement_is_unmodelled() -> None:
    assert k0_cost.cost("sglang") is None
    assert k0_cost.label("sglang", "0.5.23") == \
        "K = 0 cost: unmodelled (no published measurement for sglang)"


def test_a_cost_measured_on_another_release_is_said_unverified_for_this_one() -> None:
    # measured on vLLM 0.27.1's V1 runner (vllm#49548); 0.33.0 runs the V2 runner
    measured = k0_cost.label("vllm", "0.27.1")
    assert "unverified" not in measured
    assert k0_cost.label("vllm", "0.33.0") == (
        f"{measured}; unverified for vllm 0.33.0, which nobody has measured: a "
        "measurement of it replaces this")
