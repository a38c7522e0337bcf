"""Runbooks are untrusted input: a corpus of bad ones, injection, integrity of outputs,
secrets, and property-based tests of the loader and the budget."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specpair.analyse.budget import compute
from specpair.commands.site import text as site_text
from specpair.load.runbooks import load_runbook
from specpair.model.errors import SpecpairError
from tests.support import proc
from tests.support.geometries import dense
from tests.support.pairs import make_pair
from tests.support.paths import REPO, TESTS, write

CORPUS = TESTS / "bad_runbooks"
EXPECTED = {
    "malformed": "not valid YAML",
    "wrong-types": "Input should be a valid",
    "unknown-keys": "unknown key 'blocksize'",
    "alias-bomb": "expands to more than",
    "invalid-utf8": "invalid UTF-8",
    "duplicate-keys": "duplicate key 'deployment'",
    "impossible-geometry": "must add up to num_hidden_layers",
    "zero-sizes": "greater than 0",
    "nan-inf": "finite number",
    "name-traversal": "wrong form",
    "name-slash": "wrong form",
    "deep-nesting": "nests deeper than",
    "merge-keys": "merge keys",
    "jsonnet-escape": "leaves the runbooks tree",
    "jsonnet-endless": "did not finish within",
    "jsonnet-error": "the runbook author raised this",
    "huge": "the limit is",
}
LOCATED = re.compile(r"^(\S+):(\d+):(\d+): ", re.MULTILINE)


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def hostile_repo(repo_copy: Path) -> Path:
    for source in sorted(CORPUS.iterdir()):
        folder = repo_copy / "runbooks" / source.stem
        folder.mkdir()
        shutil.copy(source, folder / f"runbook{source.suffix}")
        shutil.copy(REPO / "runbooks" / "qwen3-8b-dflash" / "lock.json", folder / "lock.json")
    huge = repo_copy / "runbooks" / "huge" / "runbook.yaml"
    huge.parent.mkdir()
    huge.write_text("pair: {name: huge}\ndescription: '" + "x" * (2 << 20) + "'\n")
    return repo_copy


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPECPAIR_JSONNET_TIMEOUT_S": "2"}
    return proc.run([sys.executable, "-m", "specpair", *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False, cpu_s=120)


def test_every_bad_runbook_gets_a_located_error_and_writes_nothing(hostile_repo: Path) -> None:
    before = tree(hostile_repo)
    stderr = ""
    for command in (["validate", "runbooks"], ["build"], ["check", "runbooks"], ["site"]):
        result = run(hostile_repo, *command)
        assert result.returncode == 1, (command, result.stdout)
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert tree(hostile_repo) == before, command
        stderr += result.stderr
    for case, message in EXPECTED.items():
        lines = [line for line in stderr.splitlines() if f"runbooks/{case}/" in line]
        assert lines, (case, stderr[-2000:])
        assert any(message in line for line in lines), (case, lines)
    located = {m.group(1).split("/")[1] for m in LOCATED.finditer(stderr)}
    whole_file = {"huge", "jsonnet-endless", "jsonnet-escape"}  # errors about the file
    assert set(EXPECTED) - whole_file <= located, set(EXPECTED) - located


def test_no_file_is_written_outside_the_pairs_folder(repo_copy: Path) -> None:
    # a name that tried to leave runbooks/ never validates; a valid name writes only
    # runbooks/<name>/generated/ and the schema
    before = tree(repo_copy)
    shutil.rmtree(repo_copy / "runbooks" / "qwen3-8b-dflash" / "generated")
    started = time.time_ns()
    result = run(repo_copy, "build")
    assert result.returncode == 0, result.stderr
    assert tree(repo_copy) == before  # restored byte for byte, nothing new anywhere
    written = {str(p.relative_to(repo_copy)) for p in repo_copy.rglob("*")
               if p.is_file() and p.stat().st_mtime_ns >= started}
    assert written and all(w.startswith("runbooks/qwen3-8b-dflash/generated/")
                           for w in written), written


def test_site_text_escaping() -> None:
    escaped = site_text("<script>alert(1)</script> [x](javascript:y) **b** `c` | d")
    assert "<script>" not in escaped and "&lt;script&gt;" in escaped
    assert "\\[x\\]\\(javascript:y\\)" in escaped and "\\*\\*b\\*\\*" in escaped
    assert "\\|" in escaped


def test_generated_scripts_parse_and_stage_script_quotes(tmp_path: Path) -> None:
    for script in sorted(REPO.glob("runbooks/*/generated/*.sh")):
        assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0, script


# --------------------------------------------------------------------------- integrity


def _stale_everything(root: Path) -> None:
    for rb in root.glob("runbooks/*/runbook.yaml"):
        rb.write_text(rb.read_text().replace("port: 30000", "port: 30001")
                      .replace("port: 8000", "port: 8001"))


def test_a_killed_build_leaves_old_or_new_files_never_half(repo_copy: Path) -> None:
    old = {k: (repo_copy / k).read_bytes() for k in tree(repo_copy)}
    _stale_everything(repo_copy)
    done = run(repo_copy, "build", "--check")
    assert done.returncode == 3
    # the new bytes, from a build of a second copy
    twin = repo_copy.parent / "twin"
    shutil.copytree(repo_copy, twin)
    assert run(twin, "build").returncode == 0
    new = {k: (twin / k).read_bytes() for k in tree(twin)}
    for delay in (0.3, 0.6, 0.9, 1.2, 1.6, 2.0):
        process = subprocess.Popen([sys.executable, "-m", "specpair", "build"], cwd=repo_copy,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        for path in repo_copy.rglob("*"):
            if not path.is_file() or path.name.endswith(".tmp"):
                continue
            rel = str(path.relative_to(repo_copy))
            data = path.read_bytes()
            assert data in (old.get(rel), new.get(rel)), rel
    assert run(repo_copy, "build").returncode == 0
    assert not list(repo_copy.rglob("*.tmp"))  # leftovers of killed builds are removed
    assert {k: (repo_copy / k).read_bytes() for k in tree(repo_copy)} == new


def test_concurrent_builds_do_not_corrupt_outputs(repo_copy: Path) -> None:
    _stale_everything(repo_copy)
    processes = [proc.popen([sys.executable, "-m", "specpair", "build"], cpu_s=120,
                             cwd=repo_copy, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for _ in range(4)]
    assert all(proc.wait(p, 120) == 0 for p in processes)
    assert run(repo_copy, "build", "--check").returncode == 0
    assert not list(repo_copy.rglob("*.tmp"))


def test_hf_token_never_reaches_outputs(repo_copy: Path) -> None:
    secret = "hf_should_never_appear_0123456789"
    env = {**os.environ, "HF_TOKEN": secret, "HUGGING_FACE_HUB_TOKEN": secret}
    _stale_everything(repo_copy)
    outputs = []
    for command in (["build"], ["check", "runbooks", "--format", "sarif"], ["site"],
                    ["lock", "runbooks", "--offline"]):
        result = subprocess.run([sys.executable, "-m", "specpair", *command], cwd=repo_copy,
                                env=env, capture_output=True, text=True, check=False)
        outputs.append(result.stdout + result.stderr)
    assert all(secret not in out for out in outputs)
    for path in repo_copy.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


# --------------------------------------------------------------------------- properties

FIELDS = ["pair", "engine", "target", "draft", "speculation", "deployment", "acceptance",
          "staging", "codesign", "workloads", "waivers", "name", "title", "owner", "repo",
          "revision", "method", "block_size", "gpu", "context_length", "parallel", "tensor",
          "min_length", "slo", "version", "bundled", "path", "memory_fraction"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                    st.sampled_from(["DFLASH", "DSPARK", "sglang", "0.5.23", "H100-80GB",
                                     "Qwen/Qwen3-8B", "main", "auto"]))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=6)),
    max_leaves=40)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=documents)
def test_loader_never_crashes(tmp_path: Path, data: object) -> None:
    path = tmp_path / "runbooks" / "p" / "runbook.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    try:
        load_runbook(path)
    except SpecpairError as exc:
        assert exc.problems and all(p.message for p in exc.problems)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300))
def test_loader_never_crashes_on_bytes(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "runbooks" / "p" / "runbook.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    try:
        load_runbook(path)
    except SpecpairError as exc:
        assert exc.problems


@settings(max_examples=60, deadline=None)
@given(low=st.floats(0.5, 0.9), step=st.floats(0.001, 0.09),
       engine=st.sampled_from(["sglang", "vllm"]), layers=st.integers(1, 8))
def test_a_larger_memory_fraction_never_lowers_capacity(low: float, step: float, engine: str,
                                                        layers: int) -> None:
    version = "0.5.23" if engine == "sglang" else "0.33.0"
    tokens = []
    for fraction in (low, min(0.99, low + step)):
        pair = make_pair(dense(32), dense(layers), engine=engine, version=version,
                         speculation={"method": "DFLASH", "block_size": 16},
                         deployment={"memory_fraction": round(fraction, 4)})
        result = compute(pair).speculative
        assert result is not None
        tokens.append(result.max_total_tokens)
    assert tokens[1] >= tokens[0]


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 8), tp=st.sampled_from([1, 2, 4, 8]))
def test_an_fp8_draft_pool_never_lowers_capacity(layers: int, tp: int) -> None:
    tokens = []
    for dtype in ("bf16", "fp8_e4m3"):
        pair = make_pair(dense(32), dense(layers), speculation={"method": "DSPARK",
                                                                "block_size": 8},
                         deployment={"parallel": {"tensor": tp}, "draft_kv_cache_dtype": dtype})
        result = compute(pair).speculative
        assert result is not None
        tokens.append(result.max_total_tokens)
    assert tokens[1] >= tokens[0]


def test_huge_files_are_refused_before_parsing(tmp_path: Path) -> None:
    path = write(tmp_path / "runbooks" / "p" / "runbook.yaml", "a: " + "x" * (2 << 20))
    with pytest.raises(SpecpairError, match="the limit is"):
        load_runbook(path)
