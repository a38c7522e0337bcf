"""EAGLE-3 support per target architecture, asked of the engines' own model registries:
the reviewed data (the release's method_support.yaml) must be what each engine says, and the gate
must refuse exactly the pairs the engine cannot load, with the engine's reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from specpair.analyse.checks.gate import Context, run
from specpair.engines import method_support
from tests.engine import releases
from tests.engine.support import HERE
from tests.support.geometries import dense
from tests.support.pairs import make_pair

ENGINES = (*releases.SGLANG, *releases.VLLM)  # the releases with a package


def engine_answers(engine: str, architectures: list[str]) -> dict[str, bool | None]:
    name, env = engine.split()[0], releases.env(engine)
    result = subprocess.run([sys.executable, str(HERE / "eagle3_support.py")],
                            input=json.dumps({"engine": name, "architectures": architectures}),
                            capture_output=True, text=True, check=False, timeout=1200,
                            env={**os.environ, **env})
    assert result.returncode == 0, result.stderr[-4000:]
    answers: dict[str, bool | None] = json.loads(result.stdout.strip().splitlines()[-1])
    return answers


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_reviewed_eagle3_support_is_the_engines(engine: str) -> None:
    entry = method_support.support()[engine]["EAGLE3"]
    architectures = sorted(entry.supported | entry.unsupported)
    answers = engine_answers(engine, architectures)
    differ = {a: {"engine": answers[a], "data": a in entry.supported} for a in architectures
              if answers[a] is not (a in entry.supported)}
    assert not differ, differ
    # the gate refuses exactly what the engine cannot load, quoting the engine
    name, version = engine.split()
    for architecture, supported in answers.items():
        target = dense(36).model_copy(update={"architecture": architecture})
        pair = make_pair(target, dense(1), engine=name, version=version,
                         speculation={"method": "EAGLE3", "num_speculative_tokens": 3})
        found = [f for f in run(Context(pair)) if f.rule == "SP308"]
        if supported:
            assert not found, (architecture, found)
        else:
            assert len(found) == 1 and entry.reason.format(
                architecture=architecture) in found[0].message, (architecture, found)


def test_the_declared_speculators_are_vllm_0_34_0s() -> None:
    """engines/vllm_0_34_0/facts.py DECLARED_SPECULATOR (the launch's method check) is what
    0.34.0's registry declares for each draft architecture, every one of them."""
    from specpair.engines.vllm_0_34_0.facts import DECLARED_SPECULATOR

    result = subprocess.run([sys.executable, str(HERE / "eagle3_support.py")],
                            input=json.dumps({"engine": "vllm", "declared": True}),
                            capture_output=True, text=True, check=False, timeout=1200,
                            env={**os.environ, **releases.env("vllm 0.34.0")})
    assert result.returncode == 0, result.stderr[-4000:]
    declared = json.loads(result.stdout.strip().splitlines()[-1])
    assert declared == DECLARED_SPECULATOR
