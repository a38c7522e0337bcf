"""Hardening findings of issue 29 that are neither the file policy (test_file_policy.py)
nor escaping of records (test_record_escaping.py): each test reproduces one finding."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from specpair.analyse.analysis import Analysis
from specpair.cli import main
from specpair.commands.build import load_pairs
from specpair.generate import launch_files
from specpair.generate.launch_files import LWS_ENV
from specpair.resolve.pair import ResolvedPair
from tests.support import proc
from tests.support.canary_gate import served
from tests.support.geometries import dense
from tests.support.k8s_expansion import expand, expand_all
from tests.support.kubernetes import workload
from tests.support.launch_script import HOSTILE
from tests.support.pairs import make_pair, with_runbook
from tests.support.paths import REPO
from tests.support.planted_records import FIXTURE


def cli(root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        *args: str) -> tuple[int, str]:
    monkeypatch.chdir(root)
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out + out.err


@pytest.fixture
def inline_repo(tmp_path: Path) -> Path:
    """The bench fixture: a runbook with an inline GPU (no catalog key) and records."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root / "runbooks" / "tiny-vllm")
    shutil.copytree(REPO / "runbooks" / "deepseek-v3-mtp", root / "runbooks" / "deepseek-v3-mtp")
    return root


@pytest.mark.parametrize("command", [
    ["site"], ["build"], ["validate"], ["check"],
    ["plan", "runbooks/tiny-vllm/runbook.yaml"],
    ["plan", "runbooks/tiny-vllm/runbook.yaml", "--gpus", "H100-80GB,common"],
    ["budget", "runbooks/tiny-vllm/runbook.yaml"],
    ["budget", "runbooks/tiny-vllm/runbook.yaml", "--tp", "2"],
    ["calibrate", "runbooks/tiny-vllm/runbook.yaml"],
])
def test_an_inline_gpu_goes_through_every_command(
        inline_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    # `site` and `plan` raised KeyError: unknown GPU (the inline GPU's name)
    status, output = cli(inline_repo, capsys, monkeypatch, *command)
    assert status in (0, 1), output
    assert "unknown GPU" not in output, output
    if command[0] in ("site", "build", "plan", "budget", "calibrate"):
        assert status == 0, output


@pytest.mark.parametrize("command", ["budget", "plan", "calibrate"])
def test_a_folder_of_several_runbooks_is_a_usage_error(
        inline_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    status, output = cli(inline_repo, capsys, monkeypatch, command, "runbooks")
    assert status == 1 and "2 runbooks here; this command works on one" in output, output


# --------------------------------------------------------------------------- no value is an option


def _script_argv(script: str) -> list[str]:
    """The words of the script's `exec` command as bash would split them (shlex follows
    POSIX quoting, which is all the generator writes)."""
    command = script.split("\nexec ", 1)[1].replace("\\\n", " ")
    return shlex.split(command)


def _pairs() -> list[ResolvedPair]:
    examples = load_pairs(REPO)
    hostile = [with_runbook(make_pair(dense(36), dense(5), engine=engine, version=version,
                                      speculation={"method": "DFLASH", "block_size": 16},
                                      deployment={"nodes": nodes, "gpus_per_node": 4,
                                                  "parallel": {"tensor": 4 * nodes}}),
                            target={"repo": None, "revision": None,
                                    "path": "/models/$(HF_TOKEN)/" + HOSTILE},
                            draft={"repo": None, "revision": None, "path": "/d/$$(X)$"})
               for engine, version in (("sglang", "0.5.23"), ("vllm", "0.33.0"))
               for nodes in (1, 2)]
    return [*examples, *hostile]


@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: f"{p.name}-{p.engine.split()[0]}-"
                         f"{p.runbook.deployment.nodes}")
def test_the_script_args_json_and_manifest_run_the_same_argv(pair: ResolvedPair) -> None:
    files = launch_files.generate(Analysis(pair))
    index = json.loads(files["args.json"])
    data = index["engines"][pair.engine]
    argv = data["argv"]
    text = files[data["script"]].decode()
    script = _script_argv(text)
    follower = data.get("follower_argv") or []
    if follower:
        # ranks other than 0 add the follower words through a bash array (empty on rank 0)
        assert script[-1] == "${follower[@]}"
        script = script[:-1]
        (line,) = [t for t in text.splitlines() if t.startswith('if [ "${NODE_RANK}" != 0 ]')]
        assert shlex.split(line.split("follower=(", 1)[1].rsplit("); fi", 1)[0]) == follower
    assert script == [f"${{{a['env']}}}" if isinstance(a, dict) else a for a in argv]
    doc = workload(files["deployment.k8s.yaml"])
    spec = doc["spec"]["template"]["spec"] if doc["kind"] == "Deployment" else \
        doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    # the pod's environment holds HF_TOKEN (a Secret): it must never be expanded in
    pod_env = {"HF_TOKEN": "hf_secret", "X": "x", "LWS_WORKER_INDEX": "1",
               "LWS_LEADER_ADDRESS": "leader"}
    # the server runs the engine under the canary gate, the baseline launch beside it
    gated = served(spec["containers"][0]["command"])
    pod = expand_all(gated["engine"], pod_env)
    assert pod == [expand(LWS_ENV[a["env"]], pod_env) if isinstance(a, dict) else a
                   for a in argv]
    if pair.runbook.deployment.nodes == 1:
        assert expand_all(gated["baseline"], pod_env) == index["baseline"]["argv"]
    else:  # a baseline on the leader cannot replace a multi-node group
        assert gated["baseline"] == [] and gated["on_failure"] == "fail"
    assert "hf_secret" not in json.dumps(expand_all(json.loads(json.dumps(
        spec["initContainers"][0]["command"])), pod_env))
    if pair.runbook.target.path is not None:
        assert pair.runbook.target.path in pod


@pytest.mark.parametrize(("section", "key", "value"), [
    ("target", "path", "--trust-remote-code"), ("draft", "path", "-x"),
    ("deployment", "host", "--help")])
def test_a_value_starting_with_a_dash_is_refused_with_its_location(
        inline_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, section: str, key: str, value: str) -> None:
    runbook = inline_repo / "runbooks" / "tiny-vllm" / "runbook.yaml"
    text = runbook.read_text()
    data = yaml.safe_load(text)
    data[section][key] = value
    runbook.write_text(yaml.safe_dump(data))
    lines = yaml.safe_dump(data).splitlines()
    line = next(i for i, t in enumerate(lines, 1) if t.strip().startswith(f"{key}: {value}")
                or t.strip().startswith(f"{key}: '{value}'"))
    for command in (["validate"], ["check"]):
        status, output = cli(inline_repo, capsys, monkeypatch, *command)
        assert status == 1, output
        assert f"runbooks/tiny-vllm/runbook.yaml:{line}:" in output, output
        assert f"{section}.{key}" in output and "starts with '-'" in output, output


# --------------------------------------------------------------------------- hygiene

BIDI = "safe\u202e evil"  # RIGHT-TO-LEFT OVERRIDE: "Trojan Source"
ANSI = "title \x1b]0;pwned\x07 \x1b[2J"  # an OSC title change and a screen clear


@pytest.mark.parametrize(("section", "key", "value"), [
    ("pair", "title", BIDI), ("pair", "owner", ANSI), ("pair", "description", ANSI),
    ("staging", "warmup", {"prompt": BIDI}), ("target", "path", "/m/\x1b[31m")])
def test_control_and_bidi_characters_are_refused_in_runbook_text(
        inline_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, section: str, key: str, value: object) -> None:
    runbook = inline_repo / "runbooks" / "tiny-vllm" / "runbook.yaml"
    data = yaml.safe_load(runbook.read_text())
    data[section][key] = value
    runbook.write_text(json.dumps(data))  # JSON is YAML; its \\u escapes carry the bytes
    status, output = cli(inline_repo, capsys, monkeypatch, "validate")
    assert status == 1 and "control or formatting character U+" in output, output
    assert "runbooks/tiny-vllm/runbook.yaml:1:" in output, output
    # the terminal gets the escape written out, never the character
    assert "\x1b" not in output and "\u202e" not in output, output


def test_text_reaching_a_terminal_or_a_page_is_inert(tmp_path: Path) -> None:
    from specpair.commands.site import text
    from specpair.generate.render import cell
    from specpair.model.errors import SpecpairError

    rendered = SpecpairError.single(tmp_path / "a\x1b[2Jb", ANSI, BIDI).render()
    assert "\x1b" not in rendered and "\u202e" not in rendered
    assert "\\x1b[2J" in rendered and "\\u202e" in rendered  # visible, not dropped
    for escape in (cell, text):
        assert "\x1b" not in escape(ANSI) and "\u202e" not in escape(BIDI)


@pytest.mark.parametrize(("source", "where", "message"), [
    ("a: 1\n\x07b: 2\n", ":2:1:", "not valid YAML"),
    ("pair: {name: x}\n---\nb: 2\n", ":3:1:", "2 YAML documents"),
    ("", ":1:1:", "empty document")])
def test_every_loader_error_has_a_line_and_column(tmp_path: Path, source: str, where: str,
                                                  message: str) -> None:
    from specpair.load.runbooks import load_runbook
    from specpair.model.errors import SpecpairError

    path = tmp_path / "runbooks" / "p" / "runbook.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    with pytest.raises(SpecpairError) as caught:
        load_runbook(path)
    assert f"{path}{where} {message}" in caught.value.render()


# --------------------------------------------------------------------------- never a traceback

LOCK = REPO / "runbooks" / "deepseek-v3-mtp" / "lock.json"


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace('{\n', '{\n  "lock_version": 99,\n', 1), "duplicate key 'lock_version'"),
    (lambda t: "[" * 100_000 + "]" * 100_000, "nests too deeply"),
    (lambda t: t.replace('"lock_version": 1', '"lock_version": ' + "9" * 5000),
     "a number of 5000 characters"),
    (lambda t: t.replace('"lock_version": 1', '"lock_version": NaN'), "lock_version"),
])
def test_the_lock_loader_is_as_strict_as_the_runbook_loader(
        tmp_path: Path, edit: object, message: str) -> None:
    from specpair.load.runbooks import load_lock
    from specpair.model.errors import SpecpairError

    folder = tmp_path / "runbooks" / "p"
    folder.mkdir(parents=True)
    text = LOCK.read_text()
    assert '"lock_version": 1' in text
    (folder / "lock.json").write_text(edit(text))  # type: ignore[operator]
    with pytest.raises(SpecpairError) as caught:
        load_lock(folder)
    assert message in caught.value.render(), caught.value.render()[:500]


def test_a_folder_where_the_lock_belongs_is_a_located_error(tmp_path: Path) -> None:
    from specpair.load.runbooks import load_lock
    from specpair.model.errors import SpecpairError

    (tmp_path / "p" / "lock.json").mkdir(parents=True)
    with pytest.raises(SpecpairError, match="a folder, not a regular file"):
        load_lock(tmp_path / "p")


@pytest.mark.parametrize(("options", "message"), [
    ("ro", "Read-only file system"), ("size=16k", "No space left on device")])
def test_a_read_only_or_full_disk_is_a_located_error(repo_copy: Path, options: str,
                                                     message: str) -> None:
    # a real read-only or full file system over one pair's generated/: a tmpfs mounted in
    # a private mount namespace (gone when the command exits)
    generated = repo_copy / "runbooks" / "qwen3-8b-dflash" / "generated"
    before = {p.name: p.read_bytes() for p in generated.iterdir()}
    script = 'mount -t tmpfs -o "$1" tmpfs "$2" && exec "$3" -m specpair build'
    # root needs no user namespace (where AppArmor restricts those, root is still allowed)
    namespace = ["--mount"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--mount"]
    done = proc.run(["unshare", *namespace, "sh", "-c",
                           script, "sh", options, str(generated), sys.executable],
                          cwd=repo_copy, capture_output=True, text=True, check=False,
                          cpu_s=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "runbooks/qwen3-8b-dflash/generated/" in done.stderr, done.stderr
    assert message in done.stderr and "hint:" in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in generated.iterdir()} == before


def test_a_folder_where_an_output_belongs_is_a_located_error(
        repo_copy: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    card = repo_copy / "runbooks" / "qwen3-8b-dflash" / "generated" / "card.md"
    card.unlink()
    card.mkdir()
    status, output = cli(repo_copy, capsys, monkeypatch, "build")
    assert status == 1 and "generated/card.md: a folder is where this file belongs" in output


def test_locating_thousands_of_errors_in_a_large_jsonnet_runbook_is_linear(
        tmp_path: Path) -> None:
    import time

    from specpair.load.runbooks import load_runbook
    from specpair.model.errors import SpecpairError

    shutil.copytree(REPO / "runbooks", tmp_path / "runbooks")
    path = tmp_path / "runbooks" / "qwen3-8b-dflash" / "runbook.jsonnet"
    source = path.read_text().rstrip().removesuffix("}")
    keys = "".join(f"  unknown_key_{i}: {i},\n" for i in range(8000))
    padding = ("// " + "x" * 97 + "\n") * 7000  # 700 KB of comment: ~900 KB in all
    path.write_text(padding + source + keys + "}\n")
    assert path.stat().st_size > 850_000
    started = time.perf_counter()
    with pytest.raises(SpecpairError) as caught:
        load_runbook(path)
    seconds = time.perf_counter() - started
    lines = path.read_text().splitlines()
    problems = caught.value.problems
    assert len(problems) == 8000
    for problem in problems[::997]:  # each at the line that defines its key
        key = problem.location.field
        assert lines[problem.location.line - 1].strip().startswith(f"{key}:"), problem
    # O(N × size) took 50 s for N = 1,000 on the 2-core machine; linear takes ~1 s for 8,000
    assert seconds < 10, seconds


@pytest.mark.parametrize(("section", "key", "value", "message"), [
    ("deployment", "context_length", 10**30, "less than or equal to 9007199254740992"),
    ("speculation", "num_speculative_tokens", 10**400, "less than or equal to"),
    ("staging", "network_bandwidth_bytes_per_s", 1e-300, "greater than or equal to 1000"),
    ("staging", "cold_start_budget_s", 1e300, "less than or equal to 10000000"),
    ("deployment", "gpu", dict(name="g", memory_mib=81559, bandwidth_tb_s=1e-300,
                               bf16_dense_tflops=989), "greater than or equal to 0.000001"),
    ("deployment", "gpu", dict(name="g", memory_mib=81559, bandwidth_tb_s=3.35,
                               bf16_dense_tflops=989, free_before_load_gib=1e300),
     "less than or equal to 1048576"),
])
def test_hostile_numbers_are_located_errors_not_tracebacks(
        inline_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, section: str, key: str, value: object,
        message: str) -> None:
    # each of these overflowed, divided by zero or became an infinity in build/site/plan
    runbook = inline_repo / "runbooks" / "tiny-vllm" / "runbook.yaml"
    data = yaml.safe_load(runbook.read_text())
    data[section][key] = value
    runbook.write_text(json.dumps(data))
    for command in (["build"], ["site"], ["plan", "runbooks/tiny-vllm/runbook.yaml"]):
        status, output = cli(inline_repo, capsys, monkeypatch, *command)
        assert status == 1 and message in output, (command, output[-1500:])
        assert f"{section}.{key}" in output, output[-1500:]
