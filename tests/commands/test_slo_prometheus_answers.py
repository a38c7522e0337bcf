"""`slo propose --prometheus` against answers a broken or hostile server gives, over real
HTTP on 127.0.0.1: each a located error with a hint, never a traceback or an unbounded
wait, the URL's password never echoed (issue 52, item 6). The proposal from a real
Prometheus is in tests/engine/test_replay_gate.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from specpair.commands import slo
from specpair.model.errors import SpecpairError
from tests.support.answer_server import Answer, serving
from tests.support.examples import example

PAIR = example("llama33-70b-eagle3-vllm")  # per_batch SLO, EAGLE-3 at depth 3: τ ≤ 4
SECRET = "s3cr3t-password"


def _matrix(values: list[float], series: int = 1) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"i": str(s)}, "values": [[1_700_000_000 + i, str(v)]
                                             for i, v in enumerate(values)]}
        for s in range(series)]}}).encode()


ANSWERS: dict[str, dict[str, Any]] = {
    "good": {"body": _matrix([2.5 + (i % 7) / 10 for i in range(200)])},
    "not-json": {"body": b"<html>login</html>", "expect": "no query_range answer"},
    "deep": {"body": b"[" * 50_000 + b"]" * 50_000, "expect": "no query_range answer"},
    "wrong-types": {"body": b'{"status": "success", "data": {"result": "x"}}',
                    "expect": "no query_range answer"},
    "huge-number": {"body": b'{"status": "success", "data": {"result": [{"values": [[1, "2"'
                    b']]}]}, "x": ' + b"9" * 5000 + b"}", "expect": "no query_range answer"},
    "not-a-number": {"body": _matrix([2.0]).replace(b'"2.0"', b'"two"'),
                     "expect": "not a number"},
    "too-many-points": {"body": _matrix([2.0] * 10_000, series=25),
                        "expect": "250,000 points"},
    "impossible-tau": {"body": _matrix([50.0] * 10), "expect": "above 4"},
    "error": {"status": 400, "body": b'{"status": "error", "error": "bad\\u001b[31m"}',
              "expect": "Prometheus answered 400: bad\\x1b[31m"},
    "endless": {"endless": True, "expect": "bytes"},
    "drip": {"body": _matrix([2.5] * 20), "drip_s": 0.05, "expect": "took over"},
}


def _answer(path: str) -> Answer:  # the case is the first path segment
    case = ANSWERS[path.split("/")[1]]
    return Answer(body=case.get("body", b""), status=case.get("status", 200),
                  drip_s=case.get("drip_s", 0.0), endless=case.get("endless", False))


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving(_answer) as url:
        yield url.removeprefix("http://")


def test_a_good_answer_gives_a_proposal(server: str) -> None:
    proposal = slo.from_prometheus(PAIR, f"http://{server}/good", 3600)
    assert proposal.samples == 200 and 2.5 <= proposal.value <= 3.1


@pytest.mark.parametrize("case", sorted(set(ANSWERS) - {"good"}))
def test_a_hostile_prometheus_answer_is_a_located_error(
        server: str, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slo, "PROMETHEUS_LIMITS",
                        slo.Limits(deadline_s=2.0, max_bytes=slo.PROMETHEUS_LIMITS.max_bytes))
    url = f"http://admin:{SECRET}@{server}/{case}"
    started = time.monotonic()
    with pytest.raises(SpecpairError) as caught:
        slo.from_prometheus(PAIR, url, 3600)
    assert time.monotonic() - started < 30  # a deadline, not a drip's pace
    (problem,) = caught.value.problems
    rendered = caught.value.render()
    assert ANSWERS[case]["expect"] in problem.message, rendered
    assert SECRET not in rendered and problem.location.file.startswith("http://***@")
    assert problem.hint
