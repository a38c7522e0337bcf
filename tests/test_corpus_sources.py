"""The outside config corpus (tests/fixtures/corpus) is what SOURCES.json says it is.

Every model folder has exactly one SOURCES.json entry and every entry a folder; each
config.json still has the bytes recorded when it was copied from its collection (sha256),
parses as a JSON object naming its `architectures` or `model_type`, and is marked
`custom_code` exactly when it ships an `auto_map`. A draft names the model it drafts for.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus"
ENTRY_KEYS = {"folder", "model_id", "collection", "repository", "path", "commit", "role",
              "draft_of", "custom_code", "sha256", "family", "notes"}


def _entries() -> list[dict[str, Any]]:
    data = json.loads((CORPUS / "SOURCES.json").read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


ENTRIES = _entries()


def _folders() -> set[str]:
    return {p.name for p in CORPUS.iterdir() if p.is_dir()}


def test_every_folder_has_one_entry_and_every_entry_a_folder() -> None:
    named = [e["folder"] for e in ENTRIES]
    assert len(named) == len(set(named)), "a folder is listed twice in SOURCES.json"
    assert _folders() == set(named)


def test_corpus_is_large_enough_after_deduplication() -> None:
    distinct = {e["sha256"] for e in ENTRIES}
    assert len(distinct) >= 80, f"{len(distinct)} byte-distinct configs"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["folder"] for e in ENTRIES])
def test_entry_records_its_source(entry: dict[str, Any]) -> None:
    assert entry.keys() >= ENTRY_KEYS, ENTRY_KEYS - entry.keys()
    assert re.fullmatch(r"[^/\s]+/[^/\s]+", entry["model_id"])
    assert entry["folder"] == entry["model_id"].replace("/", "__")
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", entry["repository"])
    assert entry["path"]
    # a git blob is pinned by its commit, a registry artifact by its own digest; a file
    # taken from a page that showed no revision says so instead
    if entry["commit"] is None and "revision" in entry:
        assert entry["revision"]
    elif entry["commit"] is None:
        assert re.fullmatch(r"[0-9a-f]{64}", entry.get("artifact_sha256") or "")
        assert entry.get("distribution") and entry.get("artifact")
    else:
        assert re.fullmatch(r"[0-9a-f]{40}", entry["commit"])
    assert entry["role"] in {"target", "draft"}
    if entry["role"] == "draft":
        assert re.fullmatch(r"[^/\s]+/[^/\s]+", entry["draft_of"] or "")
    else:
        assert entry["draft_of"] is None


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["folder"] for e in ENTRIES])
def test_config_is_the_copied_file(entry: dict[str, Any]) -> None:
    folder: Path = CORPUS / entry["folder"]
    raw = (folder / "config.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == entry["sha256"], "config.json was edited"
    config = json.loads(raw)
    assert isinstance(config, dict)
    assert config.get("architectures") or config.get("model_type")
    assert entry["custom_code"] is ("auto_map" in config)
    listed = {"config.json"} | {x["file"] for x in entry.get("extra_files", [])}
    assert {p.name for p in folder.iterdir()} == listed
    for extra in entry.get("extra_files", []):
        data = (folder / extra["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == extra["sha256"]
        json.loads(data)
