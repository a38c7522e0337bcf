"""`specpair verify`'s engine runner against environments that misbehave: the answer of an
engine's process is input, bounded in time and size and checked before it is read.

No engine is installed in this session (tests/engine/test_verify.py runs the real
releases); the misbehaving "interpreters" here are real executables (bash scripts) that
read the case from stdin as the harness scripts do and answer as a broken or foreign
environment would."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from specpair.engines import engine_run
from specpair.engines.kv_probe import KvProbe
from specpair.model.errors import SpecpairError

PROBE = KvProbe(release="vllm 0.33.0", script="vllm_kv_plan.py", case={"tp": 1},
                expected={"num_blocks": 1}, labels={"num_blocks": "blocks"})


def interpreter(tmp_path: Path, body: str) -> str:
    """An executable that stands where the engine's python would: `$1` is the script."""
    path = tmp_path / "python"
    path.write_text("#!/usr/bin/env bash\ncat > /dev/null\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def ask(python: str) -> list[dict[str, object]]:
    return engine_run.run(engine_run.environment("vllm 0.33.0", python), [PROBE])


def test_the_release_answers_through_its_script(tmp_path: Path) -> None:
    answer = [{"ok": True, "num_blocks": 7, "version": "0.33.0"}]
    python = interpreter(tmp_path, f"echo 'engine log line'\necho '{json.dumps(answer)}'")
    assert ask(python) == answer


def test_another_version_is_refused_by_name(tmp_path: Path) -> None:
    answer = json.dumps([{"ok": True, "num_blocks": 7, "version": "0.33.1"}])
    with pytest.raises(SpecpairError) as refused:
        ask(interpreter(tmp_path, f"echo '{answer}'"))
    assert "vllm 0.33.1, not vllm 0.33.0" in refused.value.render()
    assert "SPECPAIR_ENGINE_VLLM_0_33_0" in refused.value.render()


def test_no_environment_named_says_how_to_name_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECPAIR_ENGINE_PYTHON", raising=False)
    with pytest.raises(SpecpairError) as refused:
        engine_run.environment("vllm 0.34.0", None)
    text = refused.value.render()
    assert "--engine-python" in text and "SPECPAIR_ENGINE_VLLM_0_34_0" in text


def test_a_folder_without_the_package_is_refused(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECPAIR_ENGINE_VLLM_0_34_0", str(tmp_path))
    with pytest.raises(SpecpairError, match="holds no vllm package"):
        engine_run.environment("vllm 0.34.0", "python3")


@pytest.mark.parametrize(("body", "words"), [
    ("exit 3", "exited with 3"),
    ("echo 'not json'", "answered no list of 1 result"),
    ("echo '[1, 2]'", "answered no list of 1 result"),
    ("head -c 5000000 /dev/zero | tr '\\0' 'x'", "answered over"),
])
def test_a_broken_answer_is_refused(tmp_path: Path, body: str, words: str) -> None:
    with pytest.raises(SpecpairError, match=words):
        ask(interpreter(tmp_path, body))


def test_a_silent_engine_is_given_up_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECPAIR_ENGINE_TIMEOUT_S", "1")
    with pytest.raises(SpecpairError, match="no answer within 1 s"):
        ask(interpreter(tmp_path, "exec sleep 30"))


def test_a_missing_interpreter_is_named(tmp_path: Path) -> None:
    with pytest.raises(SpecpairError, match="cannot run"):
        ask(str(tmp_path / "no-such-python"))
