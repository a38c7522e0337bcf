"""Files a user receives cite sources the user has (issue 51).

The package (code, docstrings, packaged data), README.md, the example runbooks' generated
files and the JSON schemas reach users through a clone or a wheel; the developers' notes
in ../shared reach neither. So none of those files may cite the notes: they name the
engine's own file at its release, a URL, a PR or issue, a paper, or say that a figure is
specpair's own assumption.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import REPO

PRIVATE = ("ENGINE_NOTES", "REFERENCE_MODELS", "../shared/")
CACHES = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _shipped() -> list[Path]:
    """Every file of the package (no caches), README.md, runbooks/*/generated and schema/."""
    roots = [REPO / "src" / "specpair", REPO / "schema",
             *sorted((REPO / "runbooks").glob("*/generated"))]
    files = [REPO / "README.md"]
    for root in roots:
        files += [p for p in root.rglob("*") if p.is_file() and p.suffix != ".pyc"
                  and not CACHES.intersection(p.relative_to(REPO).parts)]
    return sorted(files)


def _citations(text: str) -> list[str]:
    """The private names `text` cites, each with its line number."""
    return [f"{number}: {marker}" for number, line in enumerate(text.splitlines(), 1)
            for marker in PRIVATE if marker in line]


def test_no_shipped_file_cites_the_private_notes() -> None:
    offenders = [f"{path.relative_to(REPO)}:{hit}" for path in _shipped()
                 for hit in _citations(path.read_text(encoding="utf-8", errors="replace"))]
    assert not offenders, ("cite the engine's file at its release, a URL, a PR or a paper "
                           "instead:\n" + "\n".join(offenders))


def test_the_check_reads_the_shipped_files_and_finds_a_citation() -> None:
    shipped = {p.relative_to(REPO).as_posix() for p in _shipped()}
    assert {"README.md", "src/specpair/data/gpus.yaml", "schema/runbook.schema.json",
            "runbooks/ling-3-flash-dspark/generated/budget.md"} <= shipped
    assert not any("__pycache__" in name for name in shipped)
    assert _citations("ok\nsee ../shared/ENGINE_NOTES_SGLANG.md §4.7") == [
        "2: ENGINE_NOTES", "2: ../shared/"]
    assert _citations("REFERENCE_MODELS §1.5 (config)") == ["1: REFERENCE_MODELS"]
