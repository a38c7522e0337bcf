"""The site's page cache: a page from the cache is byte-for-byte the page drawn afresh,
a change to the pair (or its checklist) draws it again, and a broken entry is redrawn."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from specpair.commands import site
from specpair.commands.build import load_pairs
from specpair.model.errors import SpecpairError
from tests.support.pairs import with_runbook
from tests.support.paths import REPO

PAIRS = [p for p in load_pairs(REPO) if p.name in ("qwen3-8b-dflash", "llama31-8b-eagle3")]


def files(outputs: site.Outputs) -> dict[str, bytes]:
    return {str(k): v for k, v in outputs.files.items()}


def test_cached_pages_equal_fresh_ones_and_changes_redraw(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    fresh = files(site.render(PAIRS, {}))
    first = files(site.render(PAIRS, {}, cache=cache))
    assert first == fresh
    assert len(list(cache.glob("*.json"))) == len(PAIRS)
    drawn: list[str] = []
    real = site.pair_page

    def counting(analysis: site.Analysis, changes: str | None) -> tuple[
            str, dict[str, bytes], dict[str, object]]:
        drawn.append(analysis.pair.name)
        return real(analysis, changes)

    monkeypatch.setattr(site, "pair_page", counting)
    assert files(site.render(PAIRS, {}, cache=cache)) == fresh
    assert drawn == []
    changed = [with_runbook(PAIRS[0], acceptance={"slo": {"min_length": 3.25}}), PAIRS[1]]
    after = files(site.render(changed, {PAIRS[1].name: "- [ ] re-measure\n"},
                              cache=cache))
    assert sorted(drawn) == sorted(p.name for p in PAIRS)
    assert after != fresh
    # the entries of the old inputs are gone; a corrupt entry is drawn again
    assert len(list(cache.glob("*.json"))) == len(PAIRS)
    for entry in cache.glob("*.json"):
        entry.write_text("{not json")
    drawn.clear()
    assert files(site.render(changed, {PAIRS[1].name: "- [ ] re-measure\n"},
                             cache=cache)) == after
    assert len(drawn) == len(PAIRS)


def test_collector_setting_is_restored_and_pages_do_not_depend_on_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """render runs the cyclic collector less often (site.GC_YOUNG) and puts the process's
    setting back, also when a pair is refused; pages drawn with the collector running
    often are the same bytes."""
    before = gc.get_threshold()
    fewer = files(site.render(PAIRS, {}))
    assert gc.get_threshold() == before
    seen: list[tuple[int, int, int]] = []
    real = site.pair_page

    def refusing(analysis: site.Analysis, changes: str | None) -> tuple[
            str, dict[str, bytes], dict[str, object]]:
        seen.append(gc.get_threshold())
        raise SpecpairError.single(analysis.pair.name, "refused")

    monkeypatch.setattr(site, "pair_page", refusing)
    with pytest.raises(SpecpairError):
        site.render(PAIRS, {})
    assert seen and all(t[0] == site.GC_YOUNG for t in seen)
    assert gc.get_threshold() == before
    monkeypatch.setattr(site, "pair_page", real)
    monkeypatch.setattr(site, "GC_YOUNG", 50)  # a collection every 50 allocations
    assert files(site.render(PAIRS, {})) == fewer
