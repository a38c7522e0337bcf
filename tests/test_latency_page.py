"""The site page "How good is the latency model": table, summary and a deterministic chart."""

from __future__ import annotations

from specpair import calibration, latency_page


def test_page_lists_every_point_with_the_summary_numbers() -> None:
    ev = calibration.evaluate()
    text, svgs = latency_page.page()
    assert text.startswith("# How good is the latency model")
    for row in ev.rows:
        assert f"| {row.id} |" in text
    assert f"median |error| of the speedup: **{ev.median_abs_error_pct}%**" in text
    assert f"**{ev.within_band} ({100 * ev.share_within:.1f}%)**" in text
    assert "aiconfigurator" in text
    # every sweep's steps against the published curve are in its row
    for s in calibration.stored_cross_validation().sweeps:
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {s.sweep} |")]
        assert row.endswith(f"| {'; '.join(s.against) or '–'} |"), row
    chart = svgs["predicted-vs-published.svg"]
    assert chart.startswith(b"<?xml") and b"<svg" in chart


def test_the_chart_is_byte_identical_run_to_run() -> None:
    assert latency_page.page()[1] == latency_page.page()[1]
