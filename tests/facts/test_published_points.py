"""The published-measurements file (data/published_points.yaml) is well formed and usable.

Expected values are the file's own published numbers and the project's GPU catalog and
calibration models; the checks are structural (every reference resolves, every key is
documented, every point carries a measurement) plus the issue's size criteria.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from importlib import resources
from typing import Any

import pytest
import yaml

from specpair.analyse import calibration_data, published_points
from specpair.facts import hardware

DATA = resources.files("specpair").joinpath("data")


def _text(name: str) -> str:
    return DATA.joinpath(name).read_text("utf-8")


def _documented_keys(text: str) -> set[str]:
    """Keys named in a data file's header comment ("#   key   meaning" lines)."""
    header = text[: text.index("\nmodels:")]
    keys: set[str] = set()
    for line in header.splitlines():
        m = re.match(r"#\s{2,5}([a-z_]+(?:\s*/\s*[a-z_]+)*)\s", line + " ")
        if m:
            keys.update(k.strip() for k in m.group(1).split("/"))
    return keys


@pytest.fixture(scope="module")
def published() -> dict[str, Any]:
    loaded = yaml.safe_load(_text("published_points.yaml"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def points(published: dict[str, Any]) -> list[dict[str, Any]]:
    pts = published["points"]
    assert isinstance(pts, list)
    return pts


POINT_FIELDS = set(published_points.Point.model_fields)
MODEL_FIELDS = set(published_points.ModelSpec.model_fields)


def test_every_key_is_a_calibration_key_or_documented_in_the_header(
    points: list[dict[str, Any]], published: dict[str, Any]
) -> None:
    documented = _documented_keys(_text("published_points.yaml"))
    extra_point = {k for p in points for k in p} - POINT_FIELDS
    assert extra_point <= documented, sorted(extra_point - documented)
    extra_model = {k for m in published["models"].values() for k in m} - MODEL_FIELDS
    assert extra_model <= documented, sorted(extra_model - documented)


def test_points_and_models_load_in_the_calibration_schema(
    points: list[dict[str, Any]], published: dict[str, Any]
) -> None:
    """Dropping the new optional keys, each point and model is a valid calibration one."""
    for name, model in published["models"].items():
        published_points.ModelSpec.model_validate({k: v for k, v in model.items()
                                              if k in MODEL_FIELDS})
        # calibration_data.load() merges both files; a duplicate is checked against the base one
        assert name not in yaml.safe_load(_text("calibration.yaml"))["models"], \
            f"{name} duplicates calibration.yaml"
    for p in points:
        published_points.Point.model_validate({k: v for k, v in p.items() if k in POINT_FIELDS})


def test_every_reference_resolves(points: list[dict[str, Any]], published: dict[str, Any]) -> None:
    models = set(calibration_data.load().models) | set(published["models"])
    for p in points:
        assert hardware.lookup(p["gpu"]) is not None, (p["id"], p["gpu"])
        assert p["target"] in models, (p["id"], p["target"])
        assert p["draft"] is None or p["draft"] in models, (p["id"], p["draft"])
        assert (p["draft"] is None) == (p["method"] is None) or p["method"] == "NGRAM", p["id"]


def test_every_point_carries_a_published_measurement(points: list[dict[str, Any]]) -> None:
    for p in points:
        assert p["role"] == "validate", p["id"]
        assert p["source"] and p["source_id"], p["id"]
        base, spec, speedup = (
            p.get("baseline_tok_s"),
            p.get("speculative_tok_s"),
            p.get("speedup"),
        )
        if p["method"] is None:
            assert base and not spec and not speedup, p["id"]
        else:
            assert (base and spec) or speedup, p["id"]
        if base and spec and speedup:  # both published: they must agree as transcribed
            assert math.isclose(spec / base, speedup, rel_tol=0.03), p["id"]
        if p.get("tau") is not None:
            assert p["tau_source"] and p["tau"] >= 1.0, p["id"]
        if speedup and not (base and spec):
            assert p.get("speedup_metric"), f"{p['id']}: say what the speedup compares"


def test_ids_are_unique_and_sweeps_are_coherent(points: list[dict[str, Any]]) -> None:
    ids = Counter(p["id"] for p in points)
    assert not [i for i, n in ids.items() if n > 1]
    sweeps: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        if p["sweep"]:
            sweeps.setdefault(p["sweep"], []).append(p)
    for name, members in sweeps.items():
        assert len(members) >= 2, name
        kinds = {m["sweep_kind"] for m in members}
        assert len(kinds) == 1 and kinds <= {"concurrency", "depth", "config"}, name
        fixed = {(m["gpu"], m["engine"], m["target"], m["draft"], m["source_id"]) for m in members}
        assert len(fixed) == 1, f"{name} mixes setups: {fixed}"
        conc = {m["concurrency"] for m in members}
        if kinds == {"concurrency"}:
            assert len(conc) == len(members), f"{name}: one point per concurrency"
        else:
            assert len(conc) == 1, f"{name}: a {kinds} sweep holds concurrency fixed"


def test_size_criteria_of_issue_28(points: list[dict[str, Any]]) -> None:
    assert len(points) >= 150
    assert len({p["source_id"] for p in points}) >= 25
