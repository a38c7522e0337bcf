"""The pair page shows the alert thresholds and links the rules, manifest and dashboard,
which the site carries beside the page so the links resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

from specpair.commands.build import load_pairs
from specpair.commands.site import PAGES, render
from tests.support.paths import REPO


def test_pair_pages_show_thresholds_and_link_the_monitoring_files() -> None:
    pairs = load_pairs(REPO)
    outputs = render(pairs, {})
    files = {Path(p).as_posix(): c for p, c in outputs.files.items()}
    for pair in pairs:
        page = files[(PAGES / f"{pair.name}.md").as_posix()].decode()
        section = page.split("## Alerts and dashboard", 1)[1].split("\n## ", 1)[0]
        generated = REPO / "runbooks" / pair.name / "generated"
        breakeven = json.loads((generated / "breakeven.json").read_text())
        assert f"&lt; {breakeven['slo']:g}" in section
        assert f"{breakeven['at_concurrency']['break_even']:.2f} at concurrency" in section
        staging = json.loads((generated / "staging.json").read_text())
        assert f"{staging['budget_s']:g} s" in section
        assert "Capacity and autoscaling: Capacity: specpair:replica\\_token\\_capacity" in section
        links = re.findall(r"\]\(([^)]+)\)", section)
        assert sorted(links) == sorted(f"{pair.name}/{n}" for n in (
            "autoscaling.k8s.yaml", "dashboard.grafana.json", "monitoring.k8s.yaml",
            "prometheus-rules.yaml"))
        for link in links:
            # the site's copy is the committed generated file
            assert files[(PAGES / link).as_posix()] == (generated / Path(link).name).read_bytes()


def test_a_pass_that_rests_on_waivers_says_so() -> None:
    """Issue 51: the pair page said "passes the gate" with 6 of 7 findings waived."""
    from specpair.analyse.analysis import Analysis
    from specpair.commands import site
    from tests.support.examples import example

    pair = example("llama33-70b-eagle3-vllm")
    analysis = Analysis(pair)
    waived = [f for f in analysis.findings if f.waived is not None]
    assert len(waived) > 1
    page, _, _ = site.pair_page(analysis, None)
    assert f"passes the gate with {len(waived)} waived findings" in page
    unwaived = pair.model_copy(update={"runbook": pair.runbook.model_copy(
        update={"waivers": []})})
    page, _, _ = site.pair_page(Analysis(unwaived), None)
    assert "FAILS the gate" in page and "waived" not in page.split("\n\n")[2]
