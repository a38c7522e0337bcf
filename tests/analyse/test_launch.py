"""Launch commands: quoting, pre-flight engine rules, manifests, and what really runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from specpair.analyse.analysis import Analysis
from specpair.analyse.launch import build_for
from specpair.commands.build import load_pairs
from specpair.engines import registry
from specpair.generate import launch_files
from specpair.generate.stage_script import stage_script
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair
from tests.support.canary_gate import served
from tests.support.geometries import DSPARK_5L, LING, QWEN3_32B_LIKE, dense
from tests.support.kubernetes import workload
from tests.support.launch_script import HOSTILE, run_script
from tests.support.pairs import make_pair, with_runbook
from tests.support.paths import REPO


@pytest.mark.parametrize("script", sorted(REPO.glob("runbooks/*/generated/launch-*.sh")),
                         ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_generated_scripts_parse(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("engine", ["sglang 0.5.23", "vllm 0.33.0"])
def test_hostile_values_stay_single_arguments(tmp_path: Path, engine: str) -> None:
    pair = make_pair(dense(36), dense(5), engine=engine.split()[0],
                     version=engine.split()[1], speculation={"method": "DFLASH",
                                                             "block_size": 16})
    pair = with_runbook(pair, target={"repo": None, "revision": None, "path": HOSTILE},
                        staging={"warmup": {"prompt": "'; rm -rf / #"}})
    files = launch_files.generate(Analysis(pair))
    name = engine.split()[0]
    script = files[f"launch-{name}.sh"].decode()
    assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0
    result = run_script(script, tmp_path, name)
    assert result.returncode == 0, result.stderr
    assert not any((tmp_path / f).exists() for f in ("PWNED", "PWNED2", "PWNED3"))
    argv = json.loads((tmp_path / "argv.json").read_text())
    expected = json.loads(files["args.json"])["engines"][engine]["argv"]
    assert argv == expected[1:]
    assert HOSTILE in argv


def test_multi_node_script_needs_its_rank(tmp_path: Path) -> None:
    pair = make_pair(QWEN3_32B_LIKE, DSPARK_5L, deployment={
        "gpus_per_node": 4, "nodes": 2, "parallel": {"tensor": 8}})
    files = launch_files.generate(Analysis(pair))
    script = files["launch-sglang.sh"].decode()
    missing = run_script(script, tmp_path, "sglang")
    assert missing.returncode != 0 and "set DIST_INIT_ADDR" in missing.stderr
    no_rank = run_script(script, tmp_path, "sglang", {"DIST_INIT_ADDR": "10.0.0.1:25000"})
    assert no_rank.returncode != 0 and "set NODE_RANK" in no_rank.stderr
    ok = run_script(script, tmp_path, "sglang",
                    {"NODE_RANK": "1", "DIST_INIT_ADDR": "10.0.0.1:25000"})
    assert ok.returncode == 0, ok.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--node-rank") + 1] == "1"
    assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:25000"
    manifest = workload(files["deployment.k8s.yaml"])
    assert manifest["kind"] == "LeaderWorkerSet"
    template = manifest["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    assert "$(LWS_WORKER_INDEX)" in leader["command"]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == 4


def test_single_node_manifest_probes_and_stages() -> None:
    (pair,) = [p for p in load_pairs(REPO) if p.name == "ling-3-flash-dspark"]
    doc = workload(launch_files.generate(Analysis(pair))["deployment.k8s.yaml"])
    assert doc["kind"] == "Deployment"
    spec = doc["spec"]["template"]["spec"]
    server = spec["containers"][0]
    # SGLang 0.5.23's routes (sglang/srt/entrypoints/http_server.py): /ready answers
    # whether requests are taken, /health generates a token
    # ready once the canary gate wrote its marker and /ready answers (canary_gate)
    assert server["readinessProbe"]["exec"]["command"][3:] == ["/specpair/state", "30000",
                                                               "/ready"]
    assert server["livenessProbe"]["httpGet"]["path"] == "/health"
    assert server["startupProbe"]["httpGet"]["path"] == "/health"
    assert server["startupProbe"]["failureThreshold"] == 120  # 1200 s budget / 10 s
    # pair, engine, port, warmup prompt, tokens, timeout, budget: argv, not script text
    assert server["lifecycle"]["postStart"]["exec"]["command"][4:] == [
        "ling-3-flash-dspark", "sglang 0.5.23", "30000", "Say hello.", "16", "300", "1200"]
    stage = spec["initContainers"][0]["command"]
    assert stage[-2:] == ["draft=inclusionAI/Ling-3.0-flash-dspark@main",
                          "target=inclusionAI/Ling-3.0-flash@e0dfe7cd0f6e3b572bbbc0a8a84947469e428cc3"]
    assert server["resources"]["limits"]["nvidia.com/gpu"] == 4


def test_mtp_is_spelled_nextn_for_sglang_and_mtp_for_vllm() -> None:
    (pair,) = [p for p in load_pairs(REPO) if p.name == "deepseek-v3-mtp"]
    sglang = build_for(pair, "sglang 0.5.23").argv
    assert sglang[sglang.index("--speculative-algorithm") + 1] == "NEXTN"
    assert "MTP" not in sglang
    vllm = build_for(pair, "vllm 0.33.0").argv
    config = json.loads(str(vllm[vllm.index("--speculative-config") + 1]))
    # the runbook's derived schedule travels to the translation (vLLM runs it for mtp)
    assert config == {"method": "mtp", "num_speculative_tokens": 3,
                      "num_speculative_tokens_per_batch_size": [[1, 64, 3]]}


def test_block_drafters_spell_out_their_block() -> None:
    dspark = make_pair(QWEN3_32B_LIKE, DSPARK_5L, speculation={"method": "DSPARK",
                                                               "block_size": 7})
    argv = build_for(dspark).argv
    assert argv[argv.index("--speculative-dspark-block-size") + 1] == "7"
    assert "--speculative-num-draft-tokens" not in argv  # the engine sets gamma + 1 itself
    dflash = make_pair(QWEN3_32B_LIKE, DSPARK_5L, speculation={"method": "DFLASH",
                                                               "block_size": 16})
    argv = build_for(dflash).argv
    assert argv[argv.index("--speculative-dflash-block-size") + 1] == "16"
    vllm = build_for(dflash, "vllm 0.33.0").argv
    config = json.loads(str(vllm[vllm.index("--speculative-config") + 1]))
    assert config["num_speculative_tokens"] == 15 and config["method"] == "dflash"


def test_every_value_is_explicit_and_no_removed_flags() -> None:
    for pair in load_pairs(REPO):
        argv = [a for a in build_for(pair, "sglang 0.5.23").argv if isinstance(a, str)]
        for flag in ("--mem-fraction-static", "--max-running-requests", "--page-size",
                     "--context-length", "--tp-size", "--kv-cache-dtype"):
            assert flag in argv, (pair.name, flag)
        assert not any(a.startswith("--cuda-graph-max-bs") for a in argv)


def _errors(pair: ResolvedPair, engine: str | None = None) -> list[str]:
    return [f"{p.field}: {p.message} | {p.hint}" for p in build_for(pair, engine).errors]


@pytest.mark.parametrize(("sections", "engine", "expected"), [
    ({"staging": {"mode": "engine-overlap"}}, None,
     "staging.mode: sglang 0.5.23: --startup-weight-load-mode overlap is rejected"),
    ({"deployment": {"kv_cache_dtype": "fp16"}}, None,
     "deployment.kv_cache_dtype: sglang 0.5.23: --kv-cache-dtype has no fp16"),
    ({"deployment": {"parallel": {"tensor": 1, "pipeline": 2}}}, None,
     "deployment.parallel.pipeline: sglang 0.5.23: DSPARK needs pp_size 1"),
    ({"deployment": {"parallel": {"tensor": 4, "draft_tensor": 2}}}, "vllm 0.33.0",
     "deployment.parallel.draft_tensor: vllm 0.33.0: draft_tensor_parallel_size must be 1"),
])
def test_preflight_rules_name_the_engine_and_the_fix(sections: dict[str, Any],
                                                     engine: str | None, expected: str) -> None:
    pair = with_runbook(make_pair(QWEN3_32B_LIKE, DSPARK_5L), **sections)
    errors = _errors(pair, engine)
    assert any(e.startswith(expected) for e in errors), errors
    assert all(" | " in e and e.split(" | ")[1] for e in errors)  # every error has a fix


def test_replay_ring_too_short_for_the_verify_width() -> None:
    pair = with_runbook(make_pair(LING, DSPARK_5L, deployment={"parallel": {"tensor": 4}}),
                        deployment={"linear_state": {"replay_spec": True,
                                                     "replay_cache_len": 16}})
    errors = _errors(pair)
    assert any("power of two ≥ 2 × verify width (18)" in e and "set replay_cache_len to 32" in e
               for e in errors), errors


def test_primary_engine_preflight_error_fails_the_build(repo_copy: Path) -> None:
    runbook = repo_copy / "runbooks" / "ling-3-flash-dspark" / "runbook.yaml"
    runbook.write_text(runbook.read_text().replace("mode: parallel-prestage",
                                                   "mode: engine-overlap"))
    from specpair.commands.build import build

    before = (repo_copy / "runbooks/ling-3-flash-dspark/generated/launch-sglang.sh").read_bytes()
    with pytest.raises(SpecpairError) as info:
        build(repo_copy)
    problem = info.value.problems[0]
    assert problem.location.field == "staging.mode" and problem.location.line > 0
    assert "parallel-prestage" in problem.hint
    after = (repo_copy / "runbooks/ling-3-flash-dspark/generated/launch-sglang.sh").read_bytes()
    assert after == before


def test_translation_that_breaks_the_other_engine_is_explained() -> None:
    (pair,) = [p for p in load_pairs(REPO) if p.name == "llama31-8b-eagle3"]
    index = json.loads(launch_files.generate(Analysis(pair))["args.json"])
    # the translation is to the newest supported vLLM release (registry.rendered_for)
    (vllm,) = [e for e in index["engines"] if e.startswith("vllm ")]
    newest = max((r for r in registry.RELEASES.values() if r.name == "vllm"),
                 key=lambda r: tuple(int(part) for part in r.version.split(".")))
    assert vllm == newest.label
    assert index["engines"][vllm]["generated"] is False
    assert any("single chain" in why for why in index["engines"][vllm]["why"])


def test_each_pair_launches_its_own_release_and_one_translation_per_other_engine() -> None:
    # two releases of one engine both spell their script launch-vllm.sh: rendering the
    # other vLLM release as a "translation" overwrote a vllm 0.32.0 pair's own script with
    # 0.33.0's
    for pair in load_pairs(REPO):
        files = launch_files.generate(Analysis(pair))
        index = json.loads(files["args.json"])
        engines = list(index["engines"])
        names = [e.split()[0] for e in engines]
        assert pair.engine in engines and len(names) == len(set(names)), (pair.name, engines)
        own = index["engines"][pair.engine]
        script = files[own["script"]].decode()
        assert f"{pair.engine} server" in script.splitlines()[1], (pair.name, script[:200])
        assert "A translation to another engine" not in script, pair.name


@pytest.mark.parametrize(("engine", "version", "port"), [
    # the releases' own defaults: vllm 0.33.0 vllm/entrypoints/common/cli_args.py:295
    # `port: int = 8000`; sglang 0.5.23 srt/arg_groups/arg_utils.py `port ... = 30000`
    ("vllm", "0.33.0", 8000), ("vllm", "0.34.0", 8000), ("sglang", "0.5.23", 30000)])
def test_an_unset_port_is_the_engine_releases_own(engine: str, version: str,
                                                   port: int) -> None:
    """Issue 51: a vLLM pair without `port:` was launched on SGLang's 30000, and the
    staging script and manifest probed that port."""
    draft = dense(1).model_copy(update={"architecture": "LlamaForCausalLMEagle3"})
    pair = make_pair(dense(32), draft, engine=engine, version=version,
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 3})
    assert pair.runbook.deployment.port is None
    launch = build_for(pair, speculate=True)
    argv = [a for a in launch.argv if isinstance(a, str)]
    assert argv[argv.index("--port") + 1] == str(port) and launch.port == port
    analysis = Analysis(pair)
    files = launch_files.generate(analysis)
    assert f"PORT={port}\n" in stage_script(pair, analysis.staging)
    (container,) = workload(files["deployment.k8s.yaml"])["spec"]["template"]["spec"][
        "containers"]
    assert container["ports"] == [{"containerPort": port, "name": "http"},
                                  {"containerPort": 9471, "name": "canary"}]
    assert served(container["command"])["port"] == str(port)
    declared = with_runbook(pair, deployment={"port": 9123})
    assert build_for(declared, speculate=True).port == 9123
