"""No engine name or version is compared outside the engine packages (issue 26): what one
release knows lives in `specpair/engines/<release>/`, everything else asks the release."""

from __future__ import annotations

import ast
import json
import re

import pytest

from specpair.engines import registry
from specpair.model.config_geometry import from_hf_config
from tests.support.paths import FIXTURES, REPO

SRC = REPO / "src" / "specpair"
ENGINES = SRC / "engines"
NAMES = {r.name for r in registry.RELEASES.values()}
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?")


def _engine_constant(node: ast.AST) -> str | None:
    """An engine name, a version, or a `name version` label written as a literal."""
    for leaf in ast.walk(node):
        if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
            text = leaf.value
            if text in NAMES or VERSION.match(text) or (text.split(" ")[0] in NAMES and \
                    " " in text):
                return text
    return None


def branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, literal) of each comparison, prefix test or dict key on an engine literal."""
    found = []
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith"):
            parts = list(node.args)
        elif isinstance(node, ast.Dict):
            parts = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.MatchValue):
            parts = [node.value]
        for part in parts:
            literal = _engine_constant(part)
            if literal is not None:
                found.append((getattr(node, "lineno", 0), literal))
    return found


def test_no_engine_branch_outside_the_engine_packages() -> None:
    found = [f"{path.relative_to(SRC)}:{line}: {literal!r}"
             for path in sorted(SRC.rglob("*.py")) if ENGINES not in path.parents
             for line, literal in branches(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "engine knowledge outside specpair/engines/:\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_branch() -> None:
    planted = ast.parse('if engine == "vllm": pass\n'
                        'if label.startswith("sglang"): pass\n'
                        'x = {"vllm": 1}\n'
                        'if version in ("0.33.0", "0.32.0"): pass\n'
                        'if pair.engine != "sglang 0.5.23": pass\n'
                        'if engine == other: pass\n')
    assert [line for line, _ in branches(planted)] == [1, 2, 3, 4, 5]


def metric_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, literal) of each string that names an engine's metric (`<engine>:…`, the
    namespace every engine's /metrics names carry): those live in the release's
    `metrics.py` (`EngineMetrics`), and the rest of specpair reads them from there."""
    return [(getattr(leaf, "lineno", 0), leaf.value) for leaf in ast.walk(tree)
            if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str)
            and leaf.value.split(":")[0] in NAMES and ":" in leaf.value]


def test_no_metric_name_outside_the_engine_packages() -> None:
    found = [f"{path.relative_to(SRC)}:{line}: {literal!r}"
             for path in sorted(SRC.rglob("*.py")) if ENGINES not in path.parents
             for line, literal in metric_names(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "engine metric names outside specpair/engines/:\n" + "\n".join(found)


def test_the_metric_scan_finds_a_name_and_passes_other_text() -> None:
    used = {n for r in registry.RELEASES.values() for n in r.metrics.names()}
    planted = ast.parse("\n".join(f"X{i} = {name!r}" for i, name in enumerate(sorted(used)))
                        + '\nPREFIX = "vllm:spec_decode"\nURL = "http://host:8000"\n'
                        'LABEL = "vllm 0.33.0"\n')
    assert [text for _, text in metric_names(planted)] == [
        *sorted(n for n in used if n.split(":")[0] in NAMES), "vllm:spec_decode"]


@pytest.mark.parametrize("folder", ["Qwen__Qwen3-Next-80B-A3B-Thinking", "Qwen__Qwen3.5-27B"])
def test_geometry_reads_the_config_as_written_and_each_release_its_draft_mode(
        folder: str) -> None:
    """A built-in MTP layer count the config leaves out is the engine's to supply: SGLang
    0.5.23's draft-mode ModelConfig sets num_nextn_predict_layers = 1 for these (configs/
    model_config.py), vLLM's Qwen3NextMTP / Qwen3_5MTP default to 1 layer
    (models/qwen3_next_mtp.py:63, models/qwen3_5_mtp.py:82). `specpair.model.geometry` knows no
    engine: the override is each release's `draft_mode`."""
    config = json.loads((FIXTURES / "configs" / folder / "config.json").read_text())
    assert "num_nextn_predict_layers" not in config.get("text_config", config)
    geometry = from_hf_config(config)
    assert geometry.num_nextn_predict_layers == 0
    for release in registry.RELEASES.values():
        assert release.draft_mode(geometry).num_nextn_predict_layers == 1, release.label
        assert release.draft_mode(geometry).model_copy(
            update={"num_nextn_predict_layers": 0}) == geometry  # nothing else changes
