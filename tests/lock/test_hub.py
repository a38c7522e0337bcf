"""`specpair lock` against a local hub server, through the real huggingface_hub client."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specpair.lock.hub import LocalCheckpoint, resolve_checkpoint
from tests.support.checkpoints import llama_config, write_checkpoint
from tests.support.hub_lock import lock, publish
from tests.support.hubserver import Fault, HubServer, files_of
from tests.support.paths import write


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        yield server


SECRET = "hf_test_secret_token_value_0123456789"


def runbook(root: Path, name: str, target: str, draft: str | None = None,
            revision: str = "main", method: str = "STANDALONE") -> Path:
    draft_line = (f"draft: {{repo: {draft}, revision: main}}\n" if draft else
                  "draft: {bundled: true}\n" if method == "MTP" else "")
    return write(root / "runbooks" / name / "runbook.yaml", f"""\
pair: {{name: {name}, title: Test, owner: tests}}
engine: {{name: vllm, version: 0.33.0}}
target: {{repo: {target}, revision: {revision}}}
{draft_line}speculation: {{method: {method}, num_speculative_tokens: 1}}
deployment: {{gpu: H100-80GB, context_length: 2048}}
acceptance: {{slo: {{min_length: 1.5}}}}
staging: {{order: {"[draft, target]" if draft else "[target]"}}}
""")


@pytest.fixture
def pair_repo(tmp_path: Path, hub: HubServer) -> Path:
    write_checkpoint(tmp_path / "ckpt" / "target", llama_config(), shards=2)
    write_checkpoint(tmp_path / "ckpt" / "draft", llama_config(hidden=128, layers=2), seed=1)
    publish(hub, "org/target", tmp_path / "ckpt" / "target")
    publish(hub, "org/draft", tmp_path / "ckpt" / "draft")
    root = tmp_path / "repo"
    runbook(root, "p", "org/target", "org/draft")
    return root


def test_three_shards_of_100mb_lock_with_headers_only(tmp_path: Path, hub: HubServer) -> None:
    config = llama_config(hidden=1024, layers=12, heads=8, kv_heads=4, intermediate=2816,
                          vocab=300)
    shapes = write_checkpoint(tmp_path / "big", config, shards=3)
    commit = publish(hub, "org/big", tmp_path / "big")
    write_checkpoint(tmp_path / "small", llama_config(hidden=128, layers=1))
    publish(hub, "org/small", tmp_path / "small")
    root = tmp_path / "repo"
    runbook(root, "big", "org/big", "org/small")
    result = lock(root, hub, "runbooks")
    assert result.returncode == 0, result.stderr
    data = json.loads((root / "runbooks" / "big" / "lock.json").read_text())
    target = data["target"]
    params = sum(math.prod(s) for s in shapes.values())
    weight_bytes = 2 * params  # float16 tensors
    assert weight_bytes >= 100e6
    assert target["weights"]["params_by_dtype"] == {"F16": params}
    assert target["weights"]["weight_bytes"] == weight_bytes
    assert target["source"]["commit"] == commit
    assert target["provenance"] == f"hub@{commit}"
    assert target["download_bytes"] == sum(p.stat().st_size for p in (tmp_path / "big").iterdir())
    assert target["geometry"]["num_hidden_layers"] == 12
    served = sum(n for path, n in hub.bytes_sent.items() if path.startswith("/org/big/"))
    assert served < 0.01 * weight_bytes, served
    ranged = [p for m, p, _ in hub.requests
              if p.startswith("/org/big/") and p.endswith(".safetensors") and m == "GET"]
    assert len(ranged) == 3  # one ranged GET per shard: each header fits the first 100 kB


def test_hub_and_local_locks_agree_except_provenance(pair_repo: Path, tmp_path: Path,
                                                     hub: HubServer) -> None:
    assert lock(pair_repo, hub, "runbooks").returncode == 0
    from_hub = json.loads((pair_repo / "runbooks" / "p" / "lock.json").read_text())["target"]
    local, _ = resolve_checkpoint(LocalCheckpoint(tmp_path / "ckpt" / "target"))
    from_disk = local.model_dump(mode="json", exclude_none=True)
    for facts in (from_hub, from_disk):
        for key in ("source", "provenance"):
            facts.pop(key)
        for section in ("weights", "tokenizer"):
            facts[section].pop("provenance")
    assert from_hub == from_disk


def test_gated_repo_needs_a_token_that_is_never_written(tmp_path: Path, hub: HubServer) -> None:
    write_checkpoint(tmp_path / "t", llama_config())
    publish(hub, "org/gated", tmp_path / "t", gated=True, token=SECRET)
    root = tmp_path / "repo"
    runbook(root, "g", "org/gated", method="NGRAM")
    write(root / "runbooks" / "g" / "lock.json", "{}")  # a previous (unreadable) lock
    before = (root / "runbooks" / "g" / "lock.json").read_bytes()
    refused = lock(root, hub, "runbooks")
    assert refused.returncode != 0
    assert "gated" in refused.stderr and "HF_TOKEN" in refused.stderr
    assert (root / "runbooks" / "g" / "lock.json").read_bytes() == before
    allowed = lock(root, hub, "runbooks", HF_TOKEN=SECRET)
    assert allowed.returncode == 0, allowed.stderr
    assert any(auth == f"Bearer {SECRET}" for _, _, auth in hub.requests)
    for path in root.rglob("*"):
        if path.is_file() and ".hf" not in path.parts:
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in allowed.stdout + allowed.stderr


@pytest.mark.parametrize(("change", "message"), [
    ("missing-repo", "no such repository"),
    ("missing-revision", "no such revision"),
    ("malformed-config", "config.json is not valid JSON"),
    ("no-safetensors", "no .safetensors files"),
    ("server-error", "the hub answered 500 after 3 attempts"),
])
def test_errors_are_clear_and_keep_the_previous_lock(pair_repo: Path, hub: HubServer,
                                                     tmp_path: Path, change: str,
                                                     message: str) -> None:
    assert lock(pair_repo, hub, "runbooks").returncode == 0
    lock_path = pair_repo / "runbooks" / "p" / "lock.json"
    before = lock_path.read_bytes()
    rb = pair_repo / "runbooks" / "p" / "runbook.yaml"
    if change == "missing-repo":
        rb.write_text(rb.read_text().replace("org/draft", "org/nothing"))
    elif change == "missing-revision":
        rb.write_text(rb.read_text().replace("target, revision: main",
                                             "target, revision: v9"))
    elif change in ("malformed-config", "no-safetensors"):
        files = files_of(tmp_path / "ckpt" / "draft")
        if change == "malformed-config":
            files["config.json"] = b'{"hidden_size": 128,'
        else:
            files = {k: v for k, v in files.items() if not k.endswith(".safetensors")}
        hub.repos["org/draft"].commit(files)
    else:
        hub.faults.append(Fault(r"^/api/models/org/target", status=500, times=10))
    result = lock(pair_repo, hub, "runbooks", "--refresh", SPECPAIR_HUB_RETRIES="3")
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert lock_path.read_bytes() == before


def test_network_failure_and_timeout(pair_repo: Path, hub: HubServer) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    refused = lock(pair_repo, None, "runbooks", HF_ENDPOINT=dead, SPECPAIR_HUB_RETRIES="2")
    assert refused.returncode != 0 and "the connection failed after 2 attempts" in \
        refused.stderr, refused.stderr
    hub.faults.append(Fault(r"^/api/models/org/target", delay_s=3, times=2))
    slow = lock(pair_repo, hub, "runbooks", SPECPAIR_HUB_TIMEOUT_S="1", SPECPAIR_HUB_RETRIES="2")
    assert slow.returncode != 0 and "timed out after 2 attempts" in slow.stderr, slow.stderr
    assert not (pair_repo / "runbooks" / "p" / "lock.json").exists()


def test_rate_limit_and_5xx_are_retried(pair_repo: Path, hub: HubServer) -> None:
    hub.faults += [Fault(r"^/api/models/org/target", status=429),
                   Fault(r"^/api/models/org/target", status=503)]
    result = lock(pair_repo, hub, "runbooks")
    assert result.returncode == 0, result.stderr
    calls = [p for m, p, _ in hub.requests if p.startswith("/api/models/org/target")]
    assert len(calls) == 3


def test_a_moved_branch_is_drift_until_refresh(pair_repo: Path, hub: HubServer,
                                               tmp_path: Path) -> None:
    assert lock(pair_repo, hub, "runbooks").returncode == 0
    lock_path = pair_repo / "runbooks" / "p" / "lock.json"
    first = json.loads(lock_path.read_text())["target"]["source"]["commit"]
    files = files_of(tmp_path / "ckpt" / "target")
    files["README.md"] = b"new commit on main\n"
    moved = hub.repos["org/target"].commit(files)
    kept = lock(pair_repo, hub, "runbooks")
    assert kept.returncode == 0
    assert f"moved from {first[:12]} to {moved[:12]}" in kept.stderr
    assert json.loads(lock_path.read_text())["target"]["source"]["commit"] == first
    followed = lock(pair_repo, hub, "runbooks", "--refresh")
    assert followed.returncode == 0
    assert json.loads(lock_path.read_text())["target"]["source"]["commit"] == moved


def test_offline_keeps_hub_facts_and_asks_nothing(pair_repo: Path, hub: HubServer) -> None:
    assert lock(pair_repo, hub, "runbooks").returncode == 0
    before = (pair_repo / "runbooks" / "p" / "lock.json").read_bytes()
    hub.requests.clear()
    result = lock(pair_repo, hub, "runbooks", HF_HUB_OFFLINE="1")
    assert result.returncode == 0, result.stderr
    assert hub.requests == []
    assert (pair_repo / "runbooks" / "p" / "lock.json").read_bytes() == before
    (pair_repo / "runbooks" / "p" / "lock.json").unlink()
    missing = lock(pair_repo, hub, "runbooks", "--offline")
    assert missing.returncode != 0 and "offline" in missing.stderr


def test_bundled_mtp_draft_comes_from_the_target_headers(tmp_path: Path, hub: HubServer) -> None:
    config = llama_config(layers=4, num_nextn_predict_layers=1)
    shapes = write_checkpoint(tmp_path / "mtp", config, extra_layers=1)
    publish(hub, "org/mtp", tmp_path / "mtp")
    root = tmp_path / "repo"
    runbook(root, "m", "org/mtp", None, method="MTP")
    result = lock(root, hub, "runbooks")
    assert result.returncode == 0, result.stderr
    data = json.loads((root / "runbooks" / "m" / "lock.json").read_text())
    mtp_params = sum(math.prod(s) for n, s in shapes.items() if n.startswith("model.layers.4."))
    assert data["draft"]["weights"]["params_by_dtype"] == {"F16": mtp_params}
    assert data["draft"]["geometry"]["num_hidden_layers"] == 1
    assert data["draft"]["download_bytes"] == 0


def test_progress_is_shown_for_many_runbooks(pair_repo: Path, hub: HubServer) -> None:
    runbook(pair_repo, "q", "org/target", "org/draft")
    result = lock(pair_repo, hub, "runbooks")
    assert result.returncode == 0, result.stderr
    assert "[1/2]" in result.stderr and "[2/2]" in result.stderr


def test_check_warns_when_a_locked_branch_moved(pair_repo: Path, hub: HubServer,
                                                tmp_path: Path) -> None:
    assert lock(pair_repo, hub, "runbooks").returncode == 0
    files = files_of(tmp_path / "ckpt" / "draft")
    files["README.md"] = b"retrained\n"
    moved = hub.repos["org/draft"].commit(files)
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(pair_repo / ".hf"),
           "SPECPAIR_HUB_BACKOFF_S": "0.01"}
    result = subprocess.run([sys.executable, "-m", "specpair", "check", "runbooks", "--hub"],
                            cwd=pair_repo, env=env, capture_output=True, text=True, check=False)
    assert "SP103 [warning] draft: org/draft@main moved from" in result.stdout
    assert moved[:12] in result.stdout
    quiet = subprocess.run([sys.executable, "-m", "specpair", "check", "runbooks"],
                           cwd=pair_repo, env=env, capture_output=True, text=True, check=False)
    assert "SP103" not in quiet.stdout  # without --hub nothing asks the hub


def test_a_hub_lock_from_a_shard_index_passes_its_own_provenance_rule(
        tmp_path: Path, hub: HubServer) -> None:
    # A repo reached without its shards (only config.json and the shard index): the lock
    # reads bytes, not parameters per dtype, and says so; the gate must not then call it
    # hand-written (SP105), only warn that the parameter count is derived (SP104).
    ckpt = tmp_path / "indexed"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(llama_config()))
    (ckpt / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 123_456_000},
         "weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}}))
    commit = publish(hub, "org/indexed", ckpt)
    root = tmp_path / "repo"
    runbook(root, "p", "org/indexed", method="NGRAM")
    result = lock(root, hub, "runbooks")
    assert result.returncode == 0, result.stderr
    target = json.loads((root / "runbooks" / "p" / "lock.json").read_text())["target"]
    assert target["provenance"] == f"hub@{commit}"
    assert target["unconfirmed"] == ["weights.params_by_dtype", "tokenizer"]
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(root / ".hf")}
    checked = subprocess.run([sys.executable, "-m", "specpair", "check", "runbooks"],
                             cwd=root, env=env, capture_output=True, text=True, check=False)
    assert "SP104 [warning] target lock facts are declared and unconfirmed: " \
           "weights.params_by_dtype, tokenizer" in checked.stdout, checked.stdout
    assert "SP105" not in checked.stdout, checked.stdout


# ------------------------------------------------------------------ hostile hub answers
# Every answer bounded in time and size, every malformed one a located error, the previous
# lock kept (issue 52, item 6). The real huggingface_hub client against the local server.

def _listing(files: dict[str, object], sha: str = "COMMIT") -> bytes:
    return json.dumps({"id": "org/target", "modelId": "org/target", "sha": sha,
                       "private": False, "siblings": [
                           {"rfilename": n, "size": s} for n, s in files.items()]}).encode()


HOSTILE = {
    "not-json": (r"^/api/models/org/target", {"body": b"<html>mirror login</html>"},
                 "the hub's answer is malformed"),
    "deep-nesting": (r"^/api/models/org/target", {"body": b"[" * 100_000 + b"]" * 100_000},
                     "the hub's answer is malformed"),
    "wrong-types": (r"^/api/models/org/target", {"body": b'{"sha": 7, "siblings": "x"}'},
                    "repository info"),
    "negative-size": (r"^/api/models/org/target",
                      {"body": _listing({"model.safetensors": -5})}, "of size -5"),
    "huge-size": (r"^/api/models/org/target",
                  {"body": _listing({"model.safetensors": 10**400})}, "of size 1000"),
    "many-shards": (r"^/api/models/org/target", {"body": _listing(
        {"config.json": 10, **{f"m-{i:06d}.safetensors": 1 for i in range(100_000)}})},
        "lists 100,000 safetensors files"),
    "endless": (r"^/api/models/org/target", {"endless": True}, "bytes"),
    "drip": (r"^/api/models/org/target", {"body": _listing({}), "drip_s": 0.05}, "took over"),
    "bad-header": (r"safetensors$", {"body": b"\xff" * 8 + b"{not json"}, "header of"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_hub_answer_is_a_located_error_and_the_lock_is_kept(
        pair_repo: Path, hub: HubServer, case: str) -> None:
    assert lock(pair_repo, hub, "runbooks").returncode == 0
    lock_path = pair_repo / "runbooks" / "p" / "lock.json"
    before = lock_path.read_bytes()
    pattern, fault, message = HOSTILE[case]
    commit = hub.repos["org/target"].refs["main"].encode()
    if isinstance(fault.get("body"), bytes):  # the listing names the real commit
        fault = {**fault, "body": fault["body"].replace(b"COMMIT", commit)}  # type: ignore[union-attr]
    hub.faults.append(Fault(pattern, times=100, **fault))  # type: ignore[arg-type]
    result = lock(pair_repo, hub, "runbooks", "--refresh", SPECPAIR_HUB_RETRIES="1",
                  SPECPAIR_HUB_DEADLINE_S="3")
    assert result.returncode in (1, 2, 3), result.stderr
    assert message in result.stderr and "hub:org/target" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert lock_path.read_bytes() == before
