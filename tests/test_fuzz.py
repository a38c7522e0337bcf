"""Fuzzing the loaders and the CLI with mutations of the example runbooks and locks.

Each case takes one example (its runbook as data, its lock), applies a few mutations a
hostile or careless pull request could make (a hostile number, string or type at any
field, optional fields included; a removed or unknown key; the lock's numbers, keys and
text) and runs a command on it in-process. Any exception that escapes `specpair.cli.main`
(a traceback) or an exit status outside the documented ones fails the test.
Deterministic (derandomized, no example database) and bounded: the cases are fixed, and
the whole file runs in well under a minute on the 2-core machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specpair.cli import main
from specpair.load.document import load_document
from specpair.load.runbooks import load_lock, load_runbook
from specpair.model.errors import SpecpairError
from tests.support.json_paths import leaves
from tests.support.paths import REPO

EXIT_CODES = {0, 1, 2, 3}
"""The documented exit statuses: ok, problems, usage (argparse, plan), stale/impact."""

NUMBERS: list[Any] = [0, -1, 1, 2**53, 2**53 + 1, 10**30, 10**400, 1e-300, 1e300, -0.0,
                      0.5, 1e15, 65536]
TEXTS: list[Any] = ["", "-", "--trust-remote-code", "\x1b]0;x\x07", "a\u202eb", "$(HF_TOKEN)",
                    "x" * 300, "../../etc", "H100-80GB", "auto", "main", "<script>"]
OTHERS: list[Any] = [None, True, [], {}, [1, "a"], {"k": 1}]
VALUES = st.sampled_from(NUMBERS + TEXTS + OTHERS)

OPTIONAL = [  # fields the examples leave at their defaults: mutated too
    ("staging", "storage_bandwidth_bytes_per_s"), ("staging", "network_bandwidth_bytes_per_s"),
    ("staging", "stream_bandwidth_bytes_per_s"), ("staging", "graph_capture_s"),
    ("staging", "warmup_s"), ("staging", "engine_init_s"), ("staging", "cold_start_budget_s"),
    ("staging", "warmup", "timeout_s"), ("staging", "warmup", "max_tokens"),
    ("deployment", "memory_fraction"), ("deployment", "max_running_requests"),
    ("deployment", "concurrency"), ("deployment", "mean_context"),
    ("deployment", "kv_cache_memory_bytes"), ("deployment", "page_size"),
    ("deployment", "gpus_per_node"), ("deployment", "nodes"),
    ("deployment", "parallel", "tensor"), ("deployment", "parallel", "pipeline"),
    ("deployment", "assumptions", "free_before_load_bytes"),
    ("deployment", "gpu", "memory_mib"), ("deployment", "gpu", "bandwidth_tb_s"),
    ("deployment", "gpu", "bf16_dense_tflops"), ("deployment", "gpu", "free_before_load_gib"),
    ("acceptance", "reference", "mean_length"), ("acceptance", "slo", "percentile"),
    ("speculation", "num_speculative_tokens"), ("speculation", "topk"),
    ("speculation", "num_steps"), ("target", "path"), ("draft", "path"),
    ("pair", "title"), ("pair", "description"), ("deployment", "host"),
]
INLINE_GPU = {"name": "Fuzz GPU", "memory_mib": 81559, "bandwidth_tb_s": 3.35,
              "bf16_dense_tflops": 989}


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        if isinstance(data, dict):
            if key == "gpu" and not isinstance(data.get("gpu"), dict):
                data["gpu"] = dict(INLINE_GPU)
            data = data.setdefault(key, {})
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return
        if not isinstance(data, (dict, list)):
            return
    fits = isinstance(data, list) and isinstance(path[-1], int) and path[-1] < len(data)
    if isinstance(data, dict) or fits:
        data[path[-1]] = value


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _delete(data: Any, path: tuple[Any, ...]) -> None:
    for key in path[:-1]:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(data, dict):
        data.pop(path[-1], None)


EXAMPLES = [(source.parent.name, load_document(source, REPO / "runbooks").data,
             json.loads((source.parent / "lock.json").read_text()))
            for source in sorted(REPO.glob("runbooks/*/runbook.*"))]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any, Any]:
    name, runbook, lock = draw(st.sampled_from(EXAMPLES))
    runbook, lock = json.loads(json.dumps(runbook)), json.loads(json.dumps(lock))
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        target = draw(st.sampled_from(["runbook", "runbook", "runbook", "lock"]))
        data = runbook if target == "runbook" else lock
        paths = [p for p in leaves(data) if p] + (OPTIONAL if target == "runbook" else [])
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["scale", "scale", "scale", "set", "set", "delete",
                                       "unknown"]))
        current = _get(data, path)
        if action == "scale" and isinstance(current, (int, float)) \
                and not isinstance(current, bool):
            # a plausible number that stays a number: the budget, plan and site then run
            factor = draw(st.sampled_from([0, 0.5, 2, 3, 1e3, 1e6, 1e12, 2**53, 1e-9]))
            try:
                scaled = current * factor
            except OverflowError:  # an earlier mutation set a whole number past float range
                scaled = current * 2
            # (the range check first: a whole number past float range cannot be floated)
            _set(data, path, int(scaled) if isinstance(current, int) and
                 abs(scaled) < 2**63 and float(scaled).is_integer() else scaled)
        elif action in ("set", "scale"):
            _set(data, path, draw(VALUES))
        elif action == "delete":
            _delete(data, path)
        else:
            _set(data, (*path[:-1], "fuzz_unknown_key"), draw(VALUES))
    return name, runbook, lock


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _write(root: Path, name: str, runbook: Any, lock: Any, raw_lock: str | None = None
           ) -> Path:
    shutil.rmtree(root / "runbooks", ignore_errors=True)
    shutil.copytree(REPO / "runbooks" / "lib", root / "runbooks" / "lib")
    folder = root / "runbooks" / name
    folder.mkdir(parents=True)
    (folder / "runbook.yaml").write_text(json.dumps(runbook, ensure_ascii=False))
    (folder / "lock.json").write_text(raw_lock if raw_lock is not None else
                                      json.dumps(lock, ensure_ascii=False))
    return folder


COMMANDS = [["validate"], ["check"], ["build", "--check"], ["build"], ["site"],
            ["budget", "{rb}"], ["budget", "{rb}", "--tp", "2"], ["plan", "{rb}"],
            ["calibrate", "{rb}"], ["lock", "--offline"], ["staging", "calibrate", "{rb}"]]


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(case=mutated(), command=st.sampled_from(COMMANDS))
def test_the_cli_never_crashes_on_mutated_examples(
        root: Path, case: tuple[str, Any, Any], command: list[str],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _run(root, case, command, monkeypatch, capsys)


def _run(root: Path, case: tuple[str, Any, Any], command: list[str],
         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> int:
    name, runbook, lock = case
    folder = _write(root, name, runbook, lock)
    monkeypatch.chdir(root)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # `lock` must ask no hub
    argv = [a.format(rb=str(folder / "runbook.yaml")) for a in command]
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's usage error
        status = int(exc.code or 0)
    capsys.readouterr()
    assert status in EXIT_CODES, (argv, status)
    STATUSES.append(status)
    return status


STATUSES: list[int] = []


NUMERIC = [p for p in OPTIONAL if p[-1] not in ("path", "title", "description", "host")]
EDGES = [1, 2, 3, 7, 2**53, 2**53 + 1, 1e-300, 1e-9, 1e-6, 1e-3, 0.5, 0.999, 1e3, 1e6,
         1e7, 1e9, 1e13, 1e15, 1e300]


@st.composite
def renumbered(draw: st.DrawFn) -> tuple[str, Any, Any]:
    """Only numbers change, to values at and past the schema's bounds: a runbook that
    still loads then runs through the budget, the latency model, the plan and the site,
    where the overflows and divisions by zero were."""
    name, runbook, lock = draw(st.sampled_from(EXAMPLES))
    runbook = json.loads(json.dumps(runbook))
    numeric = [p for p in leaves(runbook) if isinstance(_get(runbook, p), (int, float))
               and not isinstance(_get(runbook, p), bool)] + NUMERIC
    for _ in range(draw(st.sampled_from([1, 1, 2]))):
        _set(runbook, draw(st.sampled_from(numeric)), draw(st.sampled_from(EDGES)))
    return name, runbook, lock


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=renumbered(), command=st.sampled_from(
    [["build"], ["site"], ["plan", "{rb}"], ["budget", "{rb}"], ["check"]]))
def test_the_cli_never_crashes_on_numbers_at_and_past_their_bounds(
        root: Path, case: tuple[str, Any, Any], command: list[str],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _run(root, case, command, monkeypatch, capsys)


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(case=mutated(), cut=st.integers(0, 10_000), insert=st.sampled_from(
    ["", '"', "{", "]", "\x00", "\x1b", ": ", "\n---\n", "9" * 5000, '"lock_version": 1, ']))
def test_the_loaders_never_crash_on_mutated_text(root: Path, case: tuple[str, Any, Any],
                                                 cut: int, insert: str) -> None:
    name, runbook, lock = case
    text = json.dumps(lock, indent=2)
    at = cut % (len(text) + 1)
    folder = _write(root, name, runbook, lock, raw_lock=text[:at] + insert + text[at:])
    runbook_text = (folder / "runbook.yaml").read_text()
    (folder / "runbook.yaml").write_text(runbook_text[:at] + insert + runbook_text[at:])
    for load in (lambda: load_runbook(folder / "runbook.yaml"), lambda: load_lock(folder)):
        try:
            load()
        except SpecpairError as exc:
            assert exc.problems and all(p.message for p in exc.problems)
