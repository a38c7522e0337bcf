"""The files a verify case's command reads are written where only that run reads them:
a schedule's SGLang tier file is named by an absolute deployment path
(/tmp/specpair/<pair>/…), which verify must neither need nor touch."""

from __future__ import annotations

import json
from pathlib import Path

from specpair.engines.kv_probe import KvProbe
from specpair.write import case_files

DEPLOYED = "/tmp/specpair/a-pair-nobody-made/sglang-adaptive.json"


def _probe(files: dict[str, str] | None) -> KvProbe:
    case = {"argv": ["--model-path", "/models/t", "--speculative-adaptive-config", DEPLOYED],
            "rest_gib": 10.0, **({"files": files} if files is not None else {})}
    return KvProbe(release="sglang 0.5.23", script="sglang_pools.py", case=case,
                   expected={}, labels={})


def test_a_case_s_files_are_written_privately_and_removed_after() -> None:
    tiers = json.dumps({"1": {"candidate_steps": [2]}, "9": {"candidate_steps": [1]}})
    plain = _probe(None)
    with case_files.written([_probe({DEPLOYED: tiers}), plain]) as probes:
        argv = probes[0].case["argv"]
        local = Path(argv[argv.index("--speculative-adaptive-config") + 1])
        assert local.read_text(encoding="utf-8") == tiers
        assert str(local) != DEPLOYED and "files" not in probes[0].case
        assert argv[:3] == ["--model-path", "/models/t", "--speculative-adaptive-config"]
        assert probes[1] is plain  # nothing to write: the probe as it was
    assert not local.exists() and not local.parent.exists()
    assert not Path(DEPLOYED).exists()


def test_probes_without_files_are_passed_through() -> None:
    probes = [_probe(None), _probe({})]
    with case_files.written(probes) as given:
        assert given is probes
