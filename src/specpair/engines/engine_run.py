"""Where a release's own code runs for `specpair verify`, and running its engine-side
scripts (`harness/`) there.

A release's environment is an interpreter that imports the engine, with the release's
Python files first on its path where they are not the installed package:

- `--engine-python PYTHON` (or SPECPAIR_ENGINE_PYTHON): the interpreter;
- SPECPAIR_ENGINE_<NAME>_<VERSION> (e.g. SPECPAIR_ENGINE_VLLM_0_34_0): a folder holding
  that release's package, put first on PYTHONPATH; unset, the interpreter's installed
  package answers;
- neither named: the cached environment of `environment_recipe`, created on first use
  (`specpair.write.engine_environments`; the caller passes it in as `cached`).

Either way the script reports the version it imported, and an answer from any other
version is refused: the figures are the pinned release's or none. An answer is input:
bounded in time (SPECPAIR_ENGINE_TIMEOUT_S, default 900 s, about 30× the CPU time of a
pair's planning) and in size, and checked before it is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from specpair.engines.environment_recipe import variable
from specpair.engines.kv_probe import KvProbe
from specpair.model.common import Strict
from specpair.model.errors import SpecpairError

HARNESS = Path(__file__).resolve().parent / "harness"
MAX_ANSWER_BYTES = 4 << 20  # a list of small JSON objects, one per case
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # configs are local folders


class EngineEnvironment(Strict):
    release: str
    python: str
    path: list[str]
    described: str


__all__ = ["EngineEnvironment", "environment", "named_interpreter", "run", "variable"]


def named_interpreter(python: str | None) -> str | None:
    """The interpreter the user named (--engine-python, else SPECPAIR_ENGINE_PYTHON)."""
    return python or os.environ.get("SPECPAIR_ENGINE_PYTHON") or None


def environment(release: str, python: str | None,
                cached: tuple[Path, Path | None] | None = None) -> EngineEnvironment:
    """The environment `release`'s code runs in (module docstring), or a clear refusal."""
    interpreter = named_interpreter(python)
    if not interpreter and cached is not None:
        folder_of = os.environ.get(variable(release)) or (str(cached[1]) if cached[1] else "")
        return _described(release, str(cached[0]), folder_of, "cached ")
    if not interpreter:
        raise SpecpairError.single(
            "specpair verify", f"no environment for {release}'s code is named",
            f"give --engine-python PYTHON (an interpreter that imports {release.split()[0]}), "
            f"or export SPECPAIR_ENGINE_PYTHON; a folder of the release's own package goes "
            f"in {variable(release)}")
    return _described(release, interpreter, os.environ.get(variable(release)), "")


def _described(release: str, interpreter: str, folder: str | None,
               kind: str) -> EngineEnvironment:
    if folder and not Path(folder, release.split()[0], "__init__.py").is_file():
        raise SpecpairError.single(variable(release), f"{folder} holds no "
                                   f"{release.split()[0]} package",
                                   "name the folder the release's wheel was unpacked into")
    described = f"{kind}{interpreter}" + (f" with {folder} first" if folder else "")
    return EngineEnvironment(release=release, python=interpreter,
                             path=[folder] if folder else [], described=described)


def _timeout() -> float:
    text = os.environ.get("SPECPAIR_ENGINE_TIMEOUT_S", "900")
    try:
        return max(1.0, float(text))
    except ValueError:
        raise SpecpairError.single("SPECPAIR_ENGINE_TIMEOUT_S", f"{text!r} is not a number "
                                   "of seconds", "unset it, or give e.g. 900") from None


def run(env: EngineEnvironment, probes: list[KvProbe]) -> list[dict[str, Any]]:
    """Each probe's answer from the release's own code (one process per script and
    launch environment, in order); an answer of another version is refused."""
    answers: dict[int, dict[str, Any]] = {}
    groups: dict[tuple[str, str], list[int]] = {}
    for i, probe in enumerate(probes):
        groups.setdefault((probe.script, json.dumps(probe.env, sort_keys=True)), []).append(i)
    for (script, _), members in groups.items():
        found = _call(env, script, probes[members[0]].env, [probes[i].case for i in members])
        answers.update(zip(members, found, strict=True))
    for answer in answers.values():
        version = str(answer.get("version", ""))
        if answer.get("ok") and version.split("+")[0] != env.release.split()[1]:
            raise SpecpairError.single(env.described, f"the environment imports "
                                       f"{env.release.split()[0]} {version or '(no version)'}"
                                       f", not {env.release}", "name an environment of "
                                       f"exactly {env.release} ({variable(env.release)})")
    return [answers[i] for i in range(len(probes))]


def _call(env: EngineEnvironment, script: str, launch_env: dict[str, str],
          cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    path = os.pathsep.join([*env.path, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    child_env = {**os.environ, **OFFLINE, **launch_env, "PYTHONPATH": path}
    where = f"{env.release} ({script})"
    timeout = _timeout()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            done = subprocess.run([env.python, str(HARNESS / script)], input=json.dumps(
                cases).encode(), stdout=out, stderr=err, env=child_env, timeout=timeout,
                check=False)
        except subprocess.TimeoutExpired:
            raise SpecpairError.single(where, f"no answer within {timeout:g} s",
                                       "set SPECPAIR_ENGINE_TIMEOUT_S for a slow machine"
                                       ) from None
        except OSError as exc:
            raise SpecpairError.single(where, f"cannot run {env.python}: {exc.strerror}",
                                       "give --engine-python an interpreter that imports "
                                       "the engine") from None
        out.seek(0)
        text = out.read(MAX_ANSWER_BYTES + 1)
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 3000))
        tail = err.read().decode(errors="replace")
    if done.returncode != 0 or len(text) > MAX_ANSWER_BYTES:
        why = f"exited with {done.returncode}" if done.returncode else \
            f"answered over {MAX_ANSWER_BYTES:,} bytes"
        raise SpecpairError.single(where, f"the engine's script {why}: {tail.strip()[-1500:]}",
                                   "check that the environment imports the release "
                                   "(--engine-python)")
    return _answers(where, text, len(cases))


def _answers(where: str, text: bytes, count: int) -> list[dict[str, Any]]:
    """The last line of the script's stdout: one JSON list of `count` objects."""
    lines = [line for line in text.decode(errors="replace").splitlines() if line.strip()]
    try:
        found = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, list) or len(found) != count or \
            not all(isinstance(item, dict) for item in found):
        raise SpecpairError.single(where, "the engine's script answered no list of "
                                   f"{count} result(s)", "run it by hand to see why: "
                                   f"python {HARNESS}/<script> < cases.json")
    return found
