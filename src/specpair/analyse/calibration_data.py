"""The stored calibration and its loading: the fitted parameters per GPU family × engine,
the cross-validated error bands, the reasons for a parameter on a bound, and the points
they were fitted on.

The data is `data/calibration.yaml` (reviewed points, the stored fits, the
cross-validated error bands, and the written reasons for any fitted parameter on a bound)
and `data/published_points.yaml` (published points from many more sources, same schema);
`data/held_out_points.yaml` is kept out of the fits and scored with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from specpair.analyse.published_points import (
    CalibrationError,
    ModelSpec,
    NotModelled,
    Point,
    PointsFile,
)
from specpair.analyse.step_params import StepParams
from specpair.analyse.step_priors import DRAFT_PRIORS, UNCALIBRATED
from specpair.analyse.stepmodel import UnknownMethod
from specpair.facts import hardware, yaml_data
from specpair.facts.calibration_files import HELD_OUT_FILE, package_text
from specpair.load.points_file import points_text
from specpair.model.common import Strict

POOLED = "pooled"
"""`Fitted.family` of an engine's fit pooled across GPU families: the parameters a family with
too few points of its own is given. Its efficiencies are shares of each GPU's own bandwidth
(measured, else assumed and said so) and peaks (data/gpus.yaml), which carry the hardware
difference, and its fixed costs are the engine's, so it transfers what is common to the
engine rather than one other GPU's whole fit. Chosen by leave-one-source-out over
borrowing the fit of the engine's family with the most points, and over pulling every
family's own fit towards the pool (the scores: site/docs/latency-model-notes.md)."""


class Fitted(Strict):
    family: str
    engine: Literal["vllm", "sglang"]
    params: StepParams = Field(description="shared parameters; draft_s is the prior")
    draft_s: dict[str, float] = Field(default_factory=dict, description="fitted per-draft-"
                                      "forward cost per drafter family")
    free: list[str] = Field(default_factory=list, description="parameters the fit moved")
    at_bound: dict[str, str] = Field(default_factory=dict, description="parameter → lower/"
                                     "upper bound it ended on")
    fitted_on: list[str] = Field(description="ids of the points the fit used")
    pooled_from: list[str] = Field(default_factory=list, description="an engine's pooled "
                                   "fit (family `pooled`): the GPU families of its points")

    def for_drafter(self, drafter: str) -> StepParams:
        value = self.draft_s.get(drafter, DRAFT_PRIORS.get(drafter, UNCALIBRATED.draft_s))
        return self.params.model_copy(update={"draft_s": value})


class ErrorBand(Strict):
    """Cross-validated predicted / published ratios of one GPU family × engine × drafter
    family (drafter "none": baseline throughput): the 10th and 90th percentiles."""

    family: str
    engine: str
    drafter: str
    quantity: Literal["speedup", "throughput"]
    n: int
    ratio_lo: float
    ratio_hi: float
    median_abs_error_pct: float


class CalibrationData(Strict):
    models: dict[str, ModelSpec]
    points: list[Point]
    not_modelled: list[NotModelled] = Field(default_factory=list)
    fitted: list[Fitted] = Field(default_factory=list)
    cross_validated: list[ErrorBand] = Field(default_factory=list)
    bound_reasons: dict[str, str] = Field(default_factory=dict, description="'family × "
                                          "engine: parameter' → why it may sit on a bound")


def read_points(text: str, where: str) -> PointsFile:
    """One points file, with the file and field of what is wrong."""
    try:
        raw = yaml_data.safe_load(text)
    except yaml.YAMLError as exc:
        raise CalibrationError(f"{where}: not YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise CalibrationError(f"{where}: expected a mapping with `points` (and `models`)")
    keep = {k: raw[k] for k in ("models", "points", "not_modelled", "sources") if k in raw}
    try:
        return PointsFile.model_validate(keep)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(x) for x in first["loc"])
        ident = ""
        loc = first["loc"]
        if len(loc) > 1 and loc[0] == "points" and isinstance(loc[1], int):
            ident = f" (point id {raw['points'][loc[1]].get('id', '?')!r})"
        raise CalibrationError(f"{where}: {path}{ident}: {first['msg']}; see "
                               "src/specpair/data/calibration.yaml's header for the point "
                               "schema") from exc


def _merge_models(*groups: Mapping[str, ModelSpec]) -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for group in groups:
        for name, spec in group.items():
            if name in out and out[name] != spec:
                raise CalibrationError(f"model {name!r} is described twice, differently")
            out[name] = spec
    return out


@cache
def load() -> CalibrationData:
    base = CalibrationData.model_validate(
        yaml_data.safe_load(package_text("calibration.yaml") or ""))
    extra_text = package_text("published_points.yaml")
    if extra_text is None:
        return base
    extra = read_points(extra_text, "data/published_points.yaml")
    data = base.model_copy(update={
        "models": _merge_models(base.models, extra.models),
        "points": [*base.points, *extra.points],
        "not_modelled": [*base.not_modelled, *extra.not_modelled]})
    check(data, "src/specpair/data")
    return data


@cache
def load_held_out() -> CalibrationData:
    """The held-out set, with the package's models and stored fits (empty without one)."""
    text = package_text(HELD_OUT_FILE)
    got = read_points(text, f"data/{HELD_OUT_FILE}") if text is not None else PointsFile(
        points=[])
    return _beside_package(got, f"src/specpair/data/{HELD_OUT_FILE}")


def load_points(path: Path) -> CalibrationData:
    """A user's points file, evaluated with the stored fits and the package's models
    (its own `models` may add more)."""
    return _beside_package(read_points(points_text(path), str(path)), str(path))


def _beside_package(got: PointsFile, where: str) -> CalibrationData:
    """A points file's points with the package's models (its own may add more) and the
    stored fits, checked."""
    pkg = load()
    data = pkg.model_copy(update={"models": _merge_models(pkg.models, got.models),
                                  "points": got.points, "not_modelled": got.not_modelled})
    check(data, where)
    return data


def check(data: CalibrationData, where: str) -> None:
    """Every point's GPU, models and method known, ids unique: errors with a hint."""
    seen: set[str] = set()
    for pt in data.points:
        if pt.id in seen:
            raise CalibrationError(f"{where}: point id {pt.id!r} appears twice")
        seen.add(pt.id)
        family_of(pt.gpu, f"{where}: point {pt.id}")
        for role, name in (("target", pt.target), ("draft", pt.draft)):
            if name is not None and name not in data.models:
                raise CalibrationError(
                    f"{where}: point {pt.id}: {role} {name!r} is not among the models; "
                    f"add it under `models:` (known: {', '.join(sorted(data.models))})")
        try:
            pt.shape  # noqa: B018 - validates the method
        except UnknownMethod as exc:
            raise CalibrationError(f"{where}: point {pt.id}: {exc}") from exc
        if pt.method is not None and pt.method.upper() != "NGRAM" and pt.draft is None:
            raise CalibrationError(f"{where}: point {pt.id}: method {pt.method} needs a "
                                   "`draft` model (its forward is timed)")


def family_of(gpu_key: str, where: str = "") -> str:
    found = hardware.lookup(gpu_key)
    prefix = f"{where}: " if where else ""
    if found is None:
        raise CalibrationError(f"{prefix}unknown GPU {gpu_key!r}: "
                               f"{hardware.unknown_hint(gpu_key)}")
    if found.family is None:
        raise CalibrationError(f"{prefix}GPU {gpu_key!r} has no family in the catalog")
    return found.family
