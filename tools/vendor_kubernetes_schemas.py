"""Vendor the schemas that generated manifests are validated against (tests only).

Kubernetes: each minor release's OpenAPI v2 document, as the official Python client ships
it (`kubernetes/swagger.json.unprocessed` at the client tag built from that release
branch), cut down to the definitions reachable from the kinds specpair writes, with their
descriptions removed (the rest verbatim). CRDs: the CustomResourceDefinition files of the
LeaderWorkerSet, prometheus-operator and KEDA releases, copied unchanged.

Run with a clone of each repository (any clone that has the tags):

    python tools/vendor_kubernetes_schemas.py CLIENT_PYTHON_CLONE LWS_CLONE PROM_OP_CLONE \
        KEDA_CLONE

It rewrites tests/fixtures/kubernetes/; SOURCES.md there names every file's origin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "kubernetes"
# kubernetes-client/python tag -> the Kubernetes release branch it was generated from
# (scripts/constants.py KUBERNETES_BRANCH at that tag)
CLIENT_TAGS = {"1.30": "v30.1.0", "1.31": "v31.0.0", "1.32": "v32.0.1", "1.33": "v33.1.0",
               "1.34": "v34.1.0"}
ROOTS = ("io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.PersistentVolumeClaim")
LWS_TAG = "v0.10.0"
LWS_CRD = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
PROM_OP_TAG = "v0.93.0"
KEDA_TAG = "v2.20.2"
KEDA_CRD = "config/crd/bases/keda.sh_scaledobjects.yaml"
PROM_OP_CRDS = ("example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
                "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml")


def show(clone: str, tag: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", clone, "show", f"{tag}:{path}"], check=True,
                          capture_output=True).stdout


def strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[1]} if "$ref" in node else set()
        for value in node.values():
            found |= refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node)) if node else set()
    return set()


def closure(definitions: dict[str, Any]) -> dict[str, Any]:
    keep: dict[str, Any] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = strip(definitions[name])
        todo.extend(refs(definitions[name]) - keep.keys())
    return dict(sorted(keep.items()))


def main(client: str, lws: str, prom_op: str, keda: str) -> None:
    (OUT / "crds").mkdir(parents=True, exist_ok=True)
    for minor, tag in CLIENT_TAGS.items():
        spec = json.loads(show(client, tag, "kubernetes/swagger.json.unprocessed"))
        doc = {"source": f"kubernetes-client/python {tag} kubernetes/swagger.json.unprocessed "
                         f"(Kubernetes release-{minor})",
               "definitions": closure(spec["definitions"])}
        (OUT / f"kubernetes-{minor}.json").write_text(
            json.dumps(doc, indent=1, sort_keys=True) + "\n")
    (OUT / "crds" / Path(LWS_CRD).name).write_bytes(show(lws, LWS_TAG, LWS_CRD))
    for path in PROM_OP_CRDS:
        (OUT / "crds" / Path(path).name).write_bytes(show(prom_op, PROM_OP_TAG, path))
    (OUT / "crds" / Path(KEDA_CRD).name).write_bytes(show(keda, KEDA_TAG, KEDA_CRD))


if __name__ == "__main__":
    main(*sys.argv[1:5])
