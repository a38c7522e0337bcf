"""The measurement protocol on recorded engine responses and stand-in servers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specpair.bench import metrics
from specpair.bench.client import stream_one
from specpair.bench.record import RunResult, percentile
from specpair.bench.workloads import fingerprint, generate
from specpair.engines.bench_model import FallbackError
from specpair.engines.registry import by_label
from specpair.engines.sglang_0_5_23 import bench as sglang_bench
from specpair.model.runbook import Workload
from tests.support import proc
from tests.support.fake_engine import FIXTURES, FakeEngine
from tests.support.paths import REPO

# the releases that served the recorded scrapes (tests/fixtures/engine/README.md)
VLLM = by_label("vllm 0.32.0").metrics
SGLANG = by_label("sglang 0.5.23").metrics
RECORDED = metrics.parse((FIXTURES / "vllm-0.32.0-cpu-ngram-metrics.txt").read_text())


def test_workloads_are_deterministic_and_distinct() -> None:
    short = Workload(name="s", kind="short-homogeneous", prompts=20, max_tokens=32, seed=1)
    long = Workload(name="l", kind="long-diverse", prompts=20, max_tokens=512, seed=1)
    assert fingerprint(generate(short)) == fingerprint(generate(short))
    assert fingerprint(generate(short)) != fingerprint(generate(short.model_copy(
        update={"seed": 2})))
    assert fingerprint(generate(short)) != fingerprint(generate(long))
    assert all(r.max_tokens == 512 for r in generate(long))


def test_vllm_counters_reconcile_with_the_per_request_metrics() -> None:
    zero = {name: {labels: 0.0 for labels in series} for name, series in RECORDED.items()}
    delta = metrics.delta(zero, RECORDED, VLLM)
    assert delta is not None and delta.engine == "vllm 0.32.0"
    assert (delta.verify_steps, delta.accepted, delta.drafted) == (6, 11, 14)
    # the recorded final chunk says mean_acceptance_length 2.8333: 1 + 11/6
    assert delta.acceptance_length == pytest.approx(1 + 11 / 6)
    final = json.loads(next(line for line in (FIXTURES / "vllm-0.32.0-cpu-ngram-stream.txt")
                            .read_text().splitlines() if '"usage"' in line)[6:])
    assert metrics.response_acceptance(final) == pytest.approx(delta.acceptance_length)


def test_sglang_spec_fields_are_read_from_the_final_chunk() -> None:
    chunks = [json.loads(line[6:]) for line in (FIXTURES / "sglang-0.5.23-stream.txt")
              .read_text().splitlines() if line.startswith("data: {")]
    assert [metrics.response_acceptance(c) for c in chunks] == [None, None, None, 4.0]
    listed = {"sglext": {"spec_tokens_details": [{"spec_accept_length": 2.5}]}}  # n > 1
    assert metrics.response_acceptance(listed) == 2.5


def test_sglang_counters_give_generated_over_verify() -> None:
    before = metrics.parse("sglang:spec_verify_calls_total 10\nsglang:generation_tokens_total 30\n")
    after = metrics.parse("sglang:spec_verify_calls_total 20\nsglang:generation_tokens_total 70\n")
    delta = metrics.delta(before, after, SGLANG)
    assert delta is not None and delta.acceptance_length == 4.0


def test_fallback_detector() -> None:
    no_spec = metrics.parse((FIXTURES / "vllm-0.32.0-cpu-no-spec-metrics.txt").read_text())
    with pytest.raises(FallbackError, match="no speculative-decoding metrics"):
        metrics.check_speculative_server(no_spec, VLLM, expected_k=3)
    metrics.check_speculative_server(RECORDED, VLLM, expected_k=3)
    with pytest.raises(FallbackError, match="drafts 3 tokens per step, the runbook 5"):
        metrics.check_speculative_server(RECORDED, VLLM, expected_k=5)
    with pytest.raises(FallbackError, match="not a baseline"):
        metrics.check_baseline_server(RECORDED, VLLM)
    metrics.check_baseline_server(no_spec, VLLM)
    sglang_bench.check_sglang_server_info({"speculative_algorithm": "EAGLE",
                                      "speculative_num_draft_tokens": 4},
                                     algorithm="NEXTN", draft_tokens=4, draft_path=None)
    with pytest.raises(FallbackError, match="speculative_algorithm=None"):
        sglang_bench.check_sglang_server_info({}, algorithm="DSPARK", draft_tokens=9,
                                              draft_path=None)
    with pytest.raises(FallbackError, match="verifies 8 tokens, runbook 9"):
        sglang_bench.check_sglang_server_info({"speculative_algorithm": "DSPARK",
                                          "speculative_num_draft_tokens": 8},
                                         algorithm="DSPARK", draft_tokens=9, draft_path=None)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert percentile([3.0, 1.0, 2.0, 4.0], 10) == 1.0
    assert percentile([], 10) is None


@pytest.fixture
def fakes() -> Iterator[tuple[FakeEngine, FakeEngine]]:
    baseline, spec = FakeEngine(speculative=False), FakeEngine(speculative=True)
    yield baseline, spec
    baseline.close()
    spec.close()


def test_stream_timing_and_acceptance_over_http(fakes: tuple[FakeEngine, FakeEngine]) -> None:
    _, spec = fakes
    import httpx

    async def go() -> object:
        async with httpx.AsyncClient() as client:
            return await stream_one(client, spec.url, {"prompt": "x", "stream": True})
    sample = asyncio.run(go())
    assert sample.error is None and sample.output_tokens == 16  # type: ignore[attr-defined]
    assert sample.acceptance == pytest.approx(2.8333, abs=1e-4)  # type: ignore[attr-defined]
    assert sample.ttft_s is not None and sample.ttft_s > 0  # type: ignore[attr-defined]


def _bench(repo: Path, baseline: str, spec: str) -> subprocess.CompletedProcess[str]:
    return proc.run([sys.executable, "-m", "specpair", "bench",
                           "runbooks/llama33-70b-eagle3-vllm/runbook.yaml", "--baseline",
                           baseline, "--spec", spec, "--concurrency", "1,2", "--time-limit",
                           "60"], cwd=repo, capture_output=True, text=True, check=False,
                          cpu_s=300)


def _small_workloads(repo: Path) -> None:
    path = repo / "runbooks" / "llama33-70b-eagle3-vllm" / "runbook.yaml"
    # the example's own workloads (its last block) give way to two small ones
    text = path.read_text().split("\n# Token lengths of the traffic")[0]
    path.write_text(text.rstrip("\n") + """
workloads:
  - {name: short, kind: short-homogeneous, prompts: 4, max_tokens: 16, seed: 1}
  - {name: long, kind: long-diverse, prompts: 3, max_tokens: 16, seed: 2}
""")


def test_bench_writes_a_record_and_a_card(repo_copy: Path,
                                          fakes: tuple[FakeEngine, FakeEngine]) -> None:
    baseline, spec = fakes
    spec.positions = 3
    _small_workloads(repo_copy)
    from specpair.commands.build import build

    build(repo_copy)  # outputs current before the measurement
    result = _bench(repo_copy, baseline.url, spec.url)
    assert result.returncode == 0, result.stderr
    assert "[short c=2 speculative] 4/4" in result.stderr  # the progress display
    folder = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm"
    (record,) = (folder / "measurements").glob("*.json")
    data = json.loads(record.read_text())
    cells = {(c["workload"], c["concurrency"]) for c in data["cells"]}
    assert cells == {("short", 1), ("short", 2), ("long", 1), ("long", 2)}
    assert data["cells"][0]["speculative"]["acceptance_aggregate"] == pytest.approx(1 + 11 / 6,
                                                                                  abs=1e-4)
    assert data["protocol"]["minimal_request"]["body"]["ignore_eos"] is True
    # baseline and speculative runs get the same prompts and sampling
    assert sorted(json.dumps(b, sort_keys=True) for b in baseline.bodies) == \
        sorted(json.dumps(b, sort_keys=True) for b in spec.bodies)
    card = (folder / "generated" / "card.md").read_text()
    assert "Tested workloads:** short (short-homogeneous), long (long-diverse)" in card
    assert "do not carry over" in card
    assert result.stdout.endswith(card + "\n")  # the card as written, printed
    # the build regenerates the same card from the record: outputs stay current
    assert build(repo_copy, check_only=True).drift.stale == []


def test_bench_refuses_a_server_that_does_not_speculate(repo_copy: Path,
                                                        fakes: tuple[FakeEngine, FakeEngine]
                                                        ) -> None:
    baseline, _ = fakes
    other = FakeEngine(speculative=False)
    try:
        result = _bench(repo_copy, baseline.url, other.url)
    finally:
        other.close()
    assert result.returncode == 1
    assert "unexpected fallback" in result.stderr and "no speculative" in result.stderr
    assert not (repo_copy / "runbooks" / "llama33-70b-eagle3-vllm" / "measurements").exists()


def test_bench_refuses_another_speculative_config(repo_copy: Path,
                                                  fakes: tuple[FakeEngine, FakeEngine]) -> None:
    baseline, spec = fakes
    spec.positions = 5  # the runbook drafts 3 tokens per step
    result = _bench(repo_copy, baseline.url, spec.url)
    assert result.returncode == 1 and "drafts 5 tokens per step, the runbook 3" in result.stderr


def test_cards_of_the_examples_say_not_measured() -> None:
    for card in REPO.glob("runbooks/*/generated/card.md"):
        assert "Not measured yet" in card.read_text()


def test_bench_writes_under_the_build_lock(repo_copy: Path,
                                           fakes: tuple[FakeEngine, FakeEngine]) -> None:
    # its record and regenerated card must not interleave with a concurrent build's writes
    import threading
    import time

    from specpair.commands.build import build, exclusive

    baseline, spec = fakes
    spec.positions = 3
    _small_workloads(repo_copy)
    build(repo_copy)
    folder = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm"
    with exclusive(repo_copy):  # as a build holds it
        process = proc.popen([sys.executable, "-m", "specpair", "bench",
                                    "runbooks/llama33-70b-eagle3-vllm/runbook.yaml",
                                    "--baseline", baseline.url, "--spec", spec.url,
                                    "--concurrency", "1", "--time-limit", "60"],
                                   cpu_s=120, cwd=repo_copy, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        seen: list[str] = []
        reader = threading.Thread(target=lambda: seen.extend(iter(
            lambda: process.stderr.read(1) if process.stderr else "", "")), daemon=True)
        reader.start()
        deadline = time.time() + 120
        while time.time() < deadline and "[long c=1 speculative] 3/3" not in "".join(seen):
            time.sleep(0.2)  # the measurement runs; only its writes wait for the lock
        assert "[long c=1 speculative] 3/3" in "".join(seen), "".join(seen)
        time.sleep(2)
        assert process.poll() is None and not (folder / "measurements").exists()
    assert proc.wait(process, 120) == 0, "".join(seen)
    reader.join(timeout=10)
    assert len(list((folder / "measurements").glob("*.json"))) == 1
    assert build(repo_copy, check_only=True).drift.stale == []


def _run(server: str, tpots: list[float], tokens_per_s: float, failed: int = 0) -> RunResult:
    from specpair.bench.record import Stats

    stats = Stats.of(tpots)
    return RunResult(server=server, requests=len(tpots), succeeded=len(tpots) - failed,
                     failed=failed, truncated=False, wall_s=1.0, output_tokens=10,
                     output_throughput=tokens_per_s, ttft_s=stats, tpot_s=stats,
                     itl_s=stats, e2e_s=stats,
                     counters={"verify_steps": 10, "drafted": 30} if server != "baseline"
                     else {})


def test_standard_error_of_the_mean() -> None:
    from specpair.bench.record import Stats

    stats = Stats.of([1.0, 2.0, 3.0, 4.0])
    assert stats.mean == 2.5 and stats.sem == pytest.approx((5 / 3 / 4) ** 0.5)
    assert Stats.of([1.0]).sem is None and Stats.of([]).sem is None
    # records made before the field load, without an interval
    assert Stats.model_validate({"p50": 1, "p90": 1, "p99": 1, "mean": 1}).sem is None


def test_which_wins_names_a_winner_only_outside_the_noise() -> None:
    from specpair.bench.record import Cell
    from specpair.generate.card_files import compare

    base = _run("baseline", [0.030, 0.031, 0.029, 0.030], 100.0)
    fast = _run("speculative", [0.010, 0.011, 0.009, 0.010], 300.0)
    close = _run("static", [0.0102, 0.0108, 0.0095, 0.0101], 290.0)  # within the noise
    slow = _run("static", [0.020, 0.021, 0.019, 0.020], 150.0)
    row = compare(Cell(workload="w", concurrency=1, baseline=base, speculative=fast,
                       static=slow), 3)
    assert row["winner"] == "schedule" and row["tied"] == []
    assert row["servers"]["static"]["tokens_per_s"] == 150.0
    assert row["servers"]["speculative"]["speedup_tpot"] == pytest.approx(3.0, abs=0.01)
    assert base.tpot_s.sem is not None and base.tpot_s.sem > 0
    assert row["servers"]["baseline"]["tpot_ci95_s"] == pytest.approx(1.96 * base.tpot_s.sem,
                                                                      abs=1e-6)
    row = compare(Cell(workload="w", concurrency=1, baseline=base, speculative=fast,
                       static=close), 3)
    assert row["winner"] == "tie" and row["tied"] == ["schedule", "static K=3"]
    # the target alone winning is a winner too
    row = compare(Cell(workload="w", concurrency=64, baseline=fast.model_copy(
        update={"server": "baseline", "counters": {}}), speculative=slow, static=base), 3)
    assert row["winner"] == "target alone"
    # a failed request: no verdict
    row = compare(Cell(workload="w", concurrency=1, baseline=base, speculative=fast,
                       static=_run("static", [0.01, 0.01], 1.0, failed=1)), 3)
    assert row["winner"].startswith("incomplete")
    # no static server measured: the two others are compared, static says not measured
    row = compare(Cell(workload="w", concurrency=1, baseline=base, speculative=fast), None)
    assert row["servers"]["static"] is None and row["winner"] == "schedule"
    # an old record without intervals: a point estimate, said so
    old = fast.model_copy(update={"tpot_s": fast.tpot_s.model_copy(update={"sem": None})})
    row = compare(Cell(workload="w", concurrency=1, baseline=base, speculative=old,
                       static=close), 3)
    assert row["winner"] == "schedule" and "point estimate" in row["basis"]


def test_the_card_table_says_tie_and_not_measured() -> None:
    from specpair.bench.record import Cell
    from specpair.generate.card_files import compare, comparison_markdown

    base = _run("baseline", [0.030, 0.031, 0.029, 0.030], 100.0)
    fast = _run("speculative", [0.010, 0.011, 0.009, 0.010], 300.0)
    close = _run("static", [0.0102, 0.0108, 0.0095, 0.0101], 290.0)
    text = comparison_markdown([
        compare(Cell(workload="short", concurrency=1, baseline=base, speculative=fast,
                     static=close), 3),
        compare(Cell(workload="short", concurrency=4, baseline=base, speculative=fast), 3)], 3)
    lines = {line.split(" | ")[1]: line for line in text.splitlines()
             if line.startswith("| short")}
    assert lines["1"].endswith("| tie: schedule, static K=3 |")
    assert "290 tok/s" in lines["1"] and "300 tok/s" in lines["1"]
    assert "| not measured |" in lines["4"] and lines["4"].endswith("| schedule |")
    assert "static K server was not measured" in text


def test_scheduled_cards_say_the_comparison_is_not_measured() -> None:
    scheduled = [p for p in REPO.glob("runbooks/*/runbook.yaml")
                 if "schedule: derived" in p.read_text()]
    assert scheduled
    for runbook in scheduled:
        card = (runbook.parent / "generated" / "card.md").read_text()
        assert "Which wins where (schedule, static K, target alone): not measured" in card
        assert list((runbook.parent / "generated").glob("launch-*-static.sh"))


def test_bench_compares_the_schedule_with_its_static_k(repo_copy: Path,
                                                      fakes: tuple[FakeEngine, FakeEngine]
                                                      ) -> None:
    baseline, spec = fakes
    spec.positions = 3
    static = FakeEngine(speculative=True, positions=3)
    _small_workloads(repo_copy)
    from specpair.commands.build import build

    build(repo_copy)
    folder = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm"
    args = json.loads((folder / "generated" / "args.json").read_text())
    config = args["static"]["argv"][args["static"]["argv"].index("--speculative-config") + 1]
    assert "per_batch_size" not in config and args["static"]["num_speculative_tokens"] == 3
    try:
        result = proc.run(
            [sys.executable, "-m", "specpair", "bench",
             "runbooks/llama33-70b-eagle3-vllm/runbook.yaml", "--baseline", baseline.url,
             "--spec", spec.url, "--static", static.url, "--workloads", "short",
             "--time-limit", "60"], cwd=repo_copy, capture_output=True, text=True,
            check=False, cpu_s=300)
    finally:
        static.close()
    assert result.returncode == 0, result.stderr
    (record,) = (folder / "measurements").glob("*.json")
    data = json.loads(record.read_text())
    # the default concurrencies: the derived schedule's ends ([[1, 16, 3]])
    assert data["protocol"]["concurrency"] == [1, 16]
    assert data["protocol"]["static_url"] == static.url
    assert set(data["protocol"]["servers"]) == {"baseline", "speculative", "static"}
    assert "static K = 3" in data["protocol"]["servers"]["static"]
    assert all(c["static"]["server"] == "static" and c["static"]["counters"]["verify_steps"]
               for c in data["cells"])
    assert sorted(json.dumps(b, sort_keys=True) for b in static.bodies) == \
        sorted(json.dumps(b, sort_keys=True) for b in spec.bodies)
    card = json.loads((folder / "generated" / "card.json").read_text())
    for row, cell in zip(card["which_wins"], data["cells"], strict=True):
        for role in ("baseline", "speculative", "static"):
            assert row["servers"][role]["tokens_per_s"] == cell[role]["output_throughput"]
            assert row["servers"][role]["tpot_mean_s"] == cell[role]["tpot_s"]["mean"]
    assert "## Which wins where" in (folder / "generated" / "card.md").read_text()
    assert build(repo_copy, check_only=True).drift.stale == []


def test_bench_refuses_static_without_a_schedule(repo_copy: Path,
                                                 fakes: tuple[FakeEngine, FakeEngine]) -> None:
    baseline, spec = fakes
    path = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm" / "runbook.yaml"
    path.write_text(path.read_text().replace("schedule: derived", "schedule: static"))
    result = proc.run(
        [sys.executable, "-m", "specpair", "bench",
         "runbooks/llama33-70b-eagle3-vllm/runbook.yaml", "--baseline", baseline.url,
         "--spec", spec.url, "--static", spec.url, "--concurrency", "1"],
        cwd=repo_copy, capture_output=True, text=True, check=False, cpu_s=300)
    assert result.returncode == 1 and "no speculation schedule" in result.stderr
