"""Kubernetes' own schemas as validators: the API's OpenAPI definitions of each minor release
and the CRDs' openAPIV3 schemas (vendored in tests/fixtures/kubernetes, see SOURCES.md).

Strict as kubeconform's `-strict` and the API server's `fieldValidation=Strict` (kubectl's
default): a field a schema does not name is an error, not silently dropped. The two
formats that OpenAPI v2 writes as strings but the API accepts as numbers too
(IntOrString, Quantity) are widened the way openapi2jsonschema does, and CRDs'
`x-kubernetes-int-or-string` the way the API server reads it.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from typing import Any

import jsonschema
import yaml

from tests.support import paths

FIXTURES = paths.FIXTURES / "kubernetes"
MINORS = ("1.30", "1.31", "1.32", "1.33", "1.34")
CRDS = {("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"):
        "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
        ("monitoring.coreos.com/v1", "PodMonitor"): "monitoring.coreos.com_podmonitors.yaml",
        ("monitoring.coreos.com/v1", "PrometheusRule"):
        "monitoring.coreos.com_prometheusrules.yaml",
        ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh_scaledobjects.yaml"}
INT_OR_STRING = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
QUANTITY = {"oneOf": [{"type": "string"}, {"type": "number"}]}


def documents(text: str | bytes) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def workload(text: str | bytes) -> dict[str, Any]:
    """The Deployment or LeaderWorkerSet of a deployment.k8s.yaml."""
    (doc,) = [d for d in documents(text) if d["kind"] in ("Deployment", "LeaderWorkerSet")]
    return doc


def _strict(node: Any, preserve: bool = False) -> Any:
    if isinstance(node, list):
        return [_strict(v, preserve) for v in node]
    if not isinstance(node, dict):
        return node
    if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string"):
        rest = {k: v for k, v in node.items() if k not in ("type", "format", "anyOf")}
        return {**rest, **INT_OR_STRING}
    preserve = preserve or bool(node.get("x-kubernetes-preserve-unknown-fields"))
    out = {k: (_strict(v, preserve) if k not in ("enum", "default", "example") else v)
           for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


@cache
def _definitions(minor: str) -> dict[str, Any]:
    defs = json.loads((FIXTURES / f"kubernetes-{minor}.json").read_text())["definitions"]
    strict: dict[str, Any] = _strict(defs)
    strict["io.k8s.apimachinery.pkg.api.resource.Quantity"] = QUANTITY
    return strict


def _gvk_root(minor: str, api_version: str, kind: str) -> str:
    group, _, version = api_version.rpartition("/")
    for name, definition in _definitions(minor).items():
        for gvk in definition.get("x-kubernetes-group-version-kind", []):
            if (gvk["group"], gvk["version"], gvk["kind"]) == (group, version, kind):
                return name
    raise KeyError(f"{api_version} {kind} is not in the vendored Kubernetes {minor} schema")


def validate_builtin(doc: dict[str, Any], minor: str) -> None:
    root = _gvk_root(minor, doc["apiVersion"], doc["kind"])
    schema = {"$ref": f"#/definitions/{root}", "definitions": _definitions(minor)}
    jsonschema.Draft4Validator(schema).validate(doc)


@cache
def _crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((FIXTURES / "crds" / CRDS[(api_version, kind)]).read_text())
    version = api_version.rpartition("/")[2]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    schema: dict[str, Any] = _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
    return schema


def validate_custom(doc: dict[str, Any]) -> None:
    """The CRD's openAPIV3 schema, and the object's metadata as the API's ObjectMeta."""
    jsonschema.Draft4Validator(_crd_schema(doc["apiVersion"], doc["kind"])).validate(doc)
    meta = {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "definitions": _definitions(MINORS[-1])}
    jsonschema.Draft4Validator(meta).validate(doc["metadata"])


def validate(doc: dict[str, Any]) -> None:
    """Every vendored Kubernetes release for built-in kinds, the CRD for custom ones."""
    if (doc["apiVersion"], doc["kind"]) in CRDS:
        validate_custom(doc)
        return
    for minor in MINORS:
        validate_builtin(doc, minor)


# The API server's rules for names and labels, which no OpenAPI schema carries
# (k8s.io/apimachinery/pkg/util/validation/validation.go: IsDNS1123Subdomain,
# IsQualifiedName, IsValidLabelValue; LabelValueMaxLength = 63).
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
REVISION_HASH = "5d4f8c7b9a"  # controller-revision-hash's suffix: 10 characters


def label_value_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append(f"label value {value!r}: {len(value)} > 63 characters")
    if not LABEL_VALUE.match(value):
        problems.append(f"label value {value!r}: not [A-Za-z0-9][-A-Za-z0-9_.]*")
    return problems


def api_name_problems(doc: dict[str, Any]) -> list[str]:
    """What the API server (or the controller creating the object's pods) refuses of its
    names and labels: metadata.name a DNS-1123 subdomain of at most 253 characters; every
    label value valid; a LeaderWorkerSet's group 0 is the StatefulSet `<name>-0`, whose pods
    carry controller-revision-hash `<name>-0-<10 characters>`, a label value too
    (kubernetes/kubernetes#64023)."""
    name = doc["metadata"]["name"]
    problems = []
    if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        problems.append(f"name {name!r}: not a DNS-1123 subdomain of ≤ 253 characters")
    label_sets = [doc["metadata"].get("labels", {})]
    spec = doc.get("spec", {})
    for path in (("template",), ("leaderWorkerTemplate", "leaderTemplate"),
                 ("leaderWorkerTemplate", "workerTemplate")):
        node = spec
        for key in path:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        label_sets.append(node.get("metadata", {}).get("labels", {}))
    for labels in label_sets:
        for value in labels.values():
            problems += label_value_problems(str(value))
    if doc["kind"] == "LeaderWorkerSet":
        problems += label_value_problems(f"{name}-0-{REVISION_HASH}")
    return problems
