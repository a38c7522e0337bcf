"""The site page "How good is the latency model": table, summary and a deterministic chart."""

from __future__ import annotations

from specpair.analyse import calibration_data, cross_validation
from specpair.generate import latency_page


def test_page_lists_every_point_with_the_summary_numbers() -> None:
    ev = cross_validation.evaluate()
    text, svgs = latency_page.page()
    assert text.startswith("# How good is the latency model")
    for row in ev.rows:
        assert f"| {row.id} |" in text
    assert f"median |error| of the speedup: **{ev.median_abs_error_pct}%**" in text
    assert f"**{ev.within_band} ({100 * ev.share_within:.1f}%)**" in text
    assert "aiconfigurator" in text
    # every sweep's steps against the published curve are in its row
    for s in cross_validation.stored_cross_validation().sweeps:
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {s.sweep} |")]
        assert row.endswith(f"| {'; '.join(s.against) or '–'} |"), row
    chart = svgs["predicted-vs-published.svg"]
    assert chart.startswith(b"<?xml") and b"<svg" in chart


def test_the_chart_is_byte_identical_run_to_run() -> None:
    assert latency_page.page()[1] == latency_page.page()[1]


def test_the_held_out_section_scores_every_held_out_point_or_names_its_refusal() -> None:
    """Each held-out point is in the section: a modelled one with its published baseline
    as the file records it (the source's number), a refused one counted under its
    refusal and source; the section's figures are the held-out set's, not the fitted
    points'."""
    held = calibration_data.load_held_out()
    text, _ = latency_page.page()
    section = text.split("## Held out (collected after the fits)", 1)[1].split("\n## ", 1)[0]
    modelled = [p for p in held.points if p.refusal is None]
    assert modelled
    for p in modelled:
        (row,) = [line for line in section.splitlines() if line.startswith(f"| {p.id} |")]
        if p.baseline_tok_s is not None:
            assert f"| {p.baseline_tok_s:.1f} |" in row, row
        else:  # a speedup-only point: its published speedup
            assert p.published_speedup is not None
            assert f"| {p.published_speedup:.2f} |" in row, row
    per_source: dict[tuple[str, str], int] = {}
    for p in held.points:
        if p.refusal is not None:
            key = (p.refusal.name, p.source_key)
            per_source[key] = per_source.get(key, 0) + 1
    for (name, source), k in per_source.items():
        assert f"- refused, {name}: {k} points of {source}" in section
    assert f"- {len(held.points) - sum(per_source.values())} points from " in section
    # none of its ids is among the fitted points' rows further down the page
    fitted_rows = text.split("## Every point (cross-validated)", 1)[1]
    assert not any(f"| {p.id} |" in fitted_rows for p in held.points)
