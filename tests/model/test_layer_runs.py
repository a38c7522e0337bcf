"""Issue 51: a lock writes runs of identical layers (or of a repeating pattern) once, with
`repeat`, instead of one dict per layer; the runs read back exactly, and locks that list
every layer still load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specpair.cli import main
from specpair.generate.render import dump_json
from specpair.load.runbooks import load_lock
from specpair.model.geometry import Geometry, LayerKV
from specpair.model.lock import Lock
from tests.support.geometries import dense
from tests.support.paths import REPO

GPT_OSS = "gpt-oss-120b-ngram-sglang-0-5-18"
FULL = LayerKV(kind="full", kv_heads=4, head_dim=128, v_head_dim=128)
SLIDING = LayerKV(kind="sliding", kv_heads=4, head_dim=128, v_head_dim=128, window=1024)
LINEAR = LayerKV(kind="linear")


def _with_layers(kinds: list[LayerKV]) -> Geometry:
    """A geometry whose `layers` are `kinds`, its counts made to agree."""
    base = dense(len(kinds), kv_heads=4).model_dump()
    count = {k: sum(x.kind == k for x in kinds) for k in ("full", "sliding", "linear")}
    extra: dict[str, object] = {"full_attention_layers": count["full"],
                                "sliding_window_layers": count["sliding"]}
    if count["sliding"]:
        extra["sliding_window"] = 1024
    if count["linear"]:
        extra["linear_attention"] = {"kind": "gdn", "layers": count["linear"],
                                     "num_heads": 32, "head_dim": 128, "conv_kernel": 4}
    return Geometry.model_validate({**base, **extra, "layers": [k.model_dump() for k in kinds]})


PATTERNS = {
    "94 full (Qwen3-235B)": [FULL] * 94,
    "sliding, full × 18 (gpt-oss)": [SLIDING, FULL] * 18,
    "3 linear, 1 full × 12 (Qwen3-Next)": [LINEAR, LINEAR, LINEAR, FULL] * 12,
    "5 sliding, 1 full × 4 and a tail (Gemma 3)": [*[SLIDING] * 5, FULL] * 4 + [SLIDING] * 2,
    "no repetition": [FULL, SLIDING, LINEAR],
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_runs_round_trip_exactly(name: str) -> None:
    geometry = _with_layers(PATTERNS[name])
    written = dump_json(geometry.model_dump(mode="json", exclude_none=True))
    again = Geometry.model_validate_json(written)
    assert again == geometry and again.layers == PATTERNS[name]
    assert dump_json(again.model_dump(mode="json", exclude_none=True)) == written


def test_a_94_layer_model_writes_one_run_not_94_dicts() -> None:
    layers = _with_layers([FULL] * 94).model_dump(mode="json", exclude_none=True)["layers"]
    assert layers == [{"repeat": 94, "layers": [FULL.model_dump(exclude_none=True)]}]
    tail = _with_layers([*[SLIDING] * 5, FULL] * 4 + [SLIDING] * 2).model_dump(
        mode="json", exclude_none=True)["layers"]
    assert [x.get("repeat") for x in tail] == [4, 2]


def test_a_run_must_repeat_and_hold_a_layer() -> None:
    base = dense(2, kv_heads=4).model_dump()
    for bad in ({"repeat": 1, "layers": [FULL.model_dump()]}, {"repeat": 2, "layers": []}):
        with pytest.raises(ValueError):
            Geometry.model_validate({**base, "layers": [bad]})


def _expanded(path: Path) -> None:
    """The lock as specpair wrote it before runs: one dict per layer."""
    data = json.loads(path.read_text())
    geometry = data["target"]["geometry"]
    geometry["layers"] = [dict(layer) for run in geometry["layers"]
                          for layer in (run["layers"] * run["repeat"] if "repeat" in run
                                        else [run])]
    path.write_text(json.dumps(data, indent=2))


def test_an_old_lock_loads_and_specpair_lock_rewrites_it_with_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "runbooks" / GPT_OSS, root / "runbooks" / GPT_OSS,
                    ignore=shutil.ignore_patterns("generated"))
    folder = root / "runbooks" / GPT_OSS
    committed, _ = load_lock(REPO / "runbooks" / GPT_OSS)
    _expanded(folder / "lock.json")
    old_text = (folder / "lock.json").read_text()
    assert old_text.count('"kind"') == 36
    old, _ = load_lock(folder)
    assert old == committed  # an old lock reads as the same facts
    assert main(["lock", "--offline", str(folder / "runbook.yaml")]) == 0
    capsys.readouterr()
    new_text = (folder / "lock.json").read_text()
    assert new_text == (REPO / "runbooks" / GPT_OSS / "lock.json").read_text()
    assert new_text.count('"kind"') == 2 and '"repeat": 18' in new_text
    assert Lock.model_validate_json(new_text) == committed
