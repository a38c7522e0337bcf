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
from specpair.bench.record import percentile
from specpair.bench.workloads import fingerprint, generate
from specpair.engines.registry import by_label
from specpair.schema.runbook import Workload
from tests.conftest import REPO
from tests.fake_engine import FIXTURES, FakeEngine

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
    with pytest.raises(metrics.FallbackError, match="no speculative-decoding metrics"):
        metrics.check_speculative_server(no_spec, VLLM, expected_k=3)
    metrics.check_speculative_server(RECORDED, VLLM, expected_k=3)
    with pytest.raises(metrics.FallbackError, match="drafts 3 tokens per step, the runbook 5"):
        metrics.check_speculative_server(RECORDED, VLLM, expected_k=5)
    with pytest.raises(metrics.FallbackError, match="not a baseline"):
        metrics.check_baseline_server(RECORDED, VLLM)
    metrics.check_baseline_server(no_spec, VLLM)
    metrics.check_sglang_server_info({"speculative_algorithm": "EAGLE",
                                      "speculative_num_draft_tokens": 4},
                                     algorithm="NEXTN", draft_tokens=4, draft_path=None)
    with pytest.raises(metrics.FallbackError, match="speculative_algorithm=None"):
        metrics.check_sglang_server_info({}, algorithm="DSPARK", draft_tokens=9, draft_path=None)
    with pytest.raises(metrics.FallbackError, match="verifies 8 tokens, runbook 9"):
        metrics.check_sglang_server_info({"speculative_algorithm": "DSPARK",
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
    return subprocess.run([sys.executable, "-m", "specpair", "bench",
                           "runbooks/llama33-70b-eagle3-vllm/runbook.yaml", "--baseline",
                           baseline, "--spec", spec, "--concurrency", "1,2", "--time-limit",
                           "60"], cwd=repo, capture_output=True, text=True, check=False,
                          timeout=300)


def _small_workloads(repo: Path) -> None:
    path = repo / "runbooks" / "llama33-70b-eagle3-vllm" / "runbook.yaml"
    path.write_text(path.read_text().rstrip("\n").replace("waivers:", """workloads:
  - {name: short, kind: short-homogeneous, prompts: 4, max_tokens: 16, seed: 1}
  - {name: long, kind: long-diverse, prompts: 3, max_tokens: 16, seed: 2}
waivers:""") + "\n")


def test_bench_writes_a_record_and_a_card(repo_copy: Path,
                                          fakes: tuple[FakeEngine, FakeEngine]) -> None:
    baseline, spec = fakes
    spec.positions = 3
    _small_workloads(repo_copy)
    from specpair.build import build

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

    from specpair.build import build, exclusive

    baseline, spec = fakes
    spec.positions = 3
    _small_workloads(repo_copy)
    build(repo_copy)
    folder = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm"
    with exclusive(repo_copy):  # as a build holds it
        process = subprocess.Popen([sys.executable, "-m", "specpair", "bench",
                                    "runbooks/llama33-70b-eagle3-vllm/runbook.yaml",
                                    "--baseline", baseline.url, "--spec", spec.url,
                                    "--concurrency", "1", "--time-limit", "60"],
                                   cwd=repo_copy, stdout=subprocess.PIPE,
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
    assert process.wait(timeout=120) == 0, "".join(seen)
    reader.join(timeout=10)
    assert len(list((folder / "measurements").glob("*.json"))) == 1
    assert build(repo_copy, check_only=True).drift.stale == []
