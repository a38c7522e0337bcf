"""Every generated command passes the engine's own argument parser (nox -s engines)."""

from __future__ import annotations

import json

import pytest

from specpair.analyse.analysis import Analysis
from tests.engine import releases
from tests.engine.support import REPO, parse


def example_argvs() -> dict[str, list[tuple[str, list[str]]]]:
    """release label → (name, argv) of every command the examples generate for it."""
    found: dict[str, list[tuple[str, list[str]]]] = {label: [] for label in releases.FOLDERS}
    for path in sorted(REPO.glob("runbooks/*/generated/args.json")):
        index = json.loads(path.read_text())
        entries = [(e, data) for e, data in index["engines"].items() if data["generated"]]
        # the target alone, and a scheduled pair at its static K (what `bench --static` runs)
        entries += [(index["runbook_engine"], index[role]) for role in ("baseline", "static")
                    if role in index]
        for engine, data in entries:
            argv = [a if isinstance(a, str) else "0" for a in data["argv"]]
            found[engine].append((f"{path.parent.parent.name} {engine}", argv))
    return found


# sglang 0.5.18's own commands (its example, engines/sglang_0_5_18/) and, since its package
# writes the same flags, the 0.5.23 examples' commands too
COMMANDS_OF = {"sglang 0.5.18": ("sglang 0.5.18", "sglang 0.5.23")}


# Probes of the reviewed facts (engines/vllm_0_32_0/facts.py and
# engines/sglang_0_5_18/facts.py DIFFERENCES) the parsers can show: a flag only one release
# has, a method or choice only one accepts; each release's verdict
PROBES: dict[str, list[tuple[list[str], dict[str, bool]]]] = {"sglang": [
    (["sglang", "serve", "--model-path", "m", "--quantization", "marlin"],
     {"sglang 0.5.23": False, "sglang 0.5.18": True}),
    (["sglang", "serve", "--model-path", "m", "--kv-cache-dtype", "fp4_e2m1"],
     {"sglang 0.5.23": False, "sglang 0.5.18": True}),
    (["sglang", "serve", "--model-path", "m", "--speculative-use-block-verification"],
     {"sglang 0.5.23": True, "sglang 0.5.18": False}),
], "vllm": [
    (["vllm", "serve", "m", "--monokernel"],
     {"vllm 0.34.0": True, "vllm 0.33.0": True, "vllm 0.32.0": False}),
    # 0.34.0 types `method` as SpeculativeMethod | str (a registered custom method):
    # its parser takes any name, SpeculativeConfig refuses an unknown one later
    (["vllm", "serve", "m", "--speculative-config",
      json.dumps({"method": "medusa", "model": "d", "num_speculative_tokens": 3})],
     {"vllm 0.34.0": True, "vllm 0.33.0": False, "vllm 0.32.0": True}),
    # engines/vllm_0_34_0/facts.py DIFFERENCES: the heterogeneous mode's key is gone, the
    # extensible cache's switch is new
    (["vllm", "serve", "m", "--speculative-config",
      json.dumps({"method": "draft_model", "model": "d", "num_speculative_tokens": 3,
                  "use_heterogeneous_vocab": True})],
     {"vllm 0.34.0": False, "vllm 0.33.0": True, "vllm 0.32.0": True}),
    (["vllm", "serve", "m", "--no-enable-extensible-kv-cache"],
     {"vllm 0.34.0": True, "vllm 0.33.0": False, "vllm 0.32.0": False}),
]}


def misspelled(argv: list[str]) -> list[str]:
    return ["--speculative-algoritm" if a == "--speculative-algorithm" else
            "--tensor-paralel-size" if a == "--tensor-parallel-size" else a for a in argv]


@pytest.mark.parametrize("release", sorted(releases.FOLDERS))
def test_every_example_command_parses(release: str) -> None:
    """Each release's own parser, built once (one subprocess per release): every example
    command parses, a misspelled flag fails, and the fact probes answer as reviewed."""
    engine = release.split()[0]
    items = [item for label in COMMANDS_OF.get(release, (release,))
             for item in example_argvs()[label]]
    assert items, release
    wrong = misspelled(items[0][1])
    assert wrong != items[0][1], items[0][0]
    probes = PROBES.get(engine, [])
    verdicts = parse(engine, [argv for _, argv in items] + [wrong]
                     + [argv for argv, _ in probes], release)
    examples, (bad, *answers) = verdicts[:len(items)], verdicts[len(items):]
    failures = [(name, v["error"]) for (name, _), v in zip(items, examples, strict=True)
                if not v["ok"]]
    assert not failures, failures
    assert not bad["ok"] and "unrecognized arguments" in str(bad["error"])
    assert [v["ok"] for v in answers] == [expected[release] for _, expected in probes]
    # the code that parsed is that release's, not the installed one's
    assert {v["version"] for v in verdicts} == {releases.version(release)}


def test_engine_rejects_what_preflight_rejects() -> None:
    # the engines' own verdicts on the spellings specpair refuses to generate
    sglang = parse("sglang", [["sglang", "serve", "--model-path", "m", "--cuda-graph-max-bs", "8"],
                              ["sglang", "serve", "--model-path", "m",
                               "--speculative-algorithm", "MTP"]])
    assert "ambiguous option: --cuda-graph-max-bs" in str(sglang[0]["error"])
    assert "Unknown speculative algorithm name: MTP" in str(sglang[1]["error"])
    (vllm,) = parse("vllm", [["vllm", "serve", "m", "--speculative-config",
                              json.dumps({"method": "eagle3", "model": "d",
                                          "num_speculative_tokens": 3,
                                          "draft_revision": "abc"})]])
    assert "draft_revision" in str(vllm["error"])


def test_heterogeneous_vocab_config_passes_the_real_parser_and_field_types() -> None:
    from specpair.analyse.launch import build_for
    from tests.support.vocab import hetero

    argv = [a if isinstance(a, str) else "0" for a in build_for(hetero()).argv]
    bad = [a.replace('"greedy"', '"beam"') for a in argv]
    ok, wrong = parse("vllm", [argv, bad])
    assert ok["ok"], ok["error"]
    assert ok["speculative_config"]["use_heterogeneous_vocab"] is True
    assert ok["speculative_config"]["draft_sample_method"] == "greedy"
    # the engine's own Literal refuses what it does not know
    assert not wrong["ok"] and "draft_sample_method" in str(wrong["error"])


def test_multi_node_groups_parse_and_vllm_workers_run_headless() -> None:
    """The LeaderWorkerSet's leader and worker commands, with the indices LWS fills in:
    both parse, and vLLM's parser starts the workers (rank > 0) headless."""
    from specpair.generate import launch_files
    from tests.support.canary_gate import served
    from tests.support.kubernetes import workload
    from tests.support.multinode import sglang_two_nodes, vllm_two_nodes

    for engine, make in (("sglang", sglang_two_nodes), ("vllm", vllm_two_nodes)):
        doc = workload(launch_files.generate(Analysis(make()))["deployment.k8s.yaml"])
        template = doc["spec"]["leaderWorkerTemplate"]
        argvs = []
        for role, rank in (("leaderTemplate", "0"), ("workerTemplate", "1")):
            lws = {"$(LWS_WORKER_INDEX)": rank, "$(LWS_LEADER_ADDRESS)": "10.0.0.1",
                   "$(LWS_LEADER_ADDRESS):20000": "10.0.0.1:20000"}
            command = template[role]["spec"]["containers"][0]["command"]
            if role == "leaderTemplate":  # the leader serves behind the canary gate
                gate = served(command)
                assert gate["on_failure"] == "fail" and gate["baseline"] == []
                command = gate["engine"]
            argvs.append([lws.get(a, a) for a in command])
        verdicts = parse(engine, argvs)
        assert all(v["ok"] for v in verdicts), verdicts
        if engine == "vllm":
            assert [v["headless"] for v in verdicts] == [False, True]
            assert [v["node_rank"] for v in verdicts] == [0, 1]
