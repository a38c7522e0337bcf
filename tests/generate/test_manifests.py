"""Every generated Kubernetes object against the API's own schemas (Kubernetes 1.30–1.34,
strict) and the CRDs' openAPIV3 schemas, then what the controllers will do with it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from specpair.analyse.analysis import Analysis
from specpair.generate import launch_files, monitoring_files
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair
from tests.support.canary_gate import served
from tests.support.kubernetes import (
    MINORS,
    api_name_problems,
    documents,
    validate,
    validate_builtin,
    workload,
)
from tests.support.launch_script import run_script
from tests.support.multinode import PAIRS, sglang_two_nodes, vllm_two_nodes
from tests.support.pairs import with_runbook
from tests.support.paths import REPO

PLATFORM = {"node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "models_volume": {"storage_class": "fast-nvme", "size_gib": 500},
            "monitor_labels": {"release": "kube-prometheus-stack"}, "shm_size": "32Gi",
            "cpu_request": "12", "memory_request": "96Gi", "hf_token_secret": None}


VARIANTS = {"sglang-2-nodes": sglang_two_nodes, "vllm-2-nodes": vllm_two_nodes,
            "platform-set": lambda: with_runbook(PAIRS["qwen3-8b-dflash"], kubernetes=PLATFORM),
            "platform-set-2-nodes": lambda: with_runbook(vllm_two_nodes(),
                                                         kubernetes=PLATFORM)}


def manifests(pair: ResolvedPair) -> dict[str, bytes]:
    """Launch and monitoring manifests (a deployment the step model refuses too: its
    monitoring drops the break-even rules and keeps the measured ones)."""
    files = {**launch_files.generate(Analysis(pair)), **monitoring_files.generate(Analysis(pair))}
    return {k: v for k, v in files.items() if k.endswith(".k8s.yaml")}


@pytest.mark.parametrize("make", [vllm_two_nodes, sglang_two_nodes])
def test_monitoring_of_a_deployment_over_two_nodes_states_the_refusal(make: Any) -> None:
    """No break-even rule (the step model refuses the deployment, so there is no τ*), the
    refusal stated in the file, and the SLO alert, which needs no model, kept."""
    files = monitoring_files.generate(Analysis(make()))
    for name in (monitoring_files.RULES, monitoring_files.MANIFEST):
        text = files[name].decode()
        assert "not modelled: cross-node model parallelism" in text
        docs = [d for d in yaml.safe_load_all(text) if d]
        groups = docs[0]["groups"] if name == monitoring_files.RULES else docs[0]["spec"]["groups"]
        alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
        assert "SpecpairAcceptanceBelowSLO" in alerts
        assert "SpecpairBelowBreakEven" not in alerts
        records = {r["record"] for g in groups for r in g["rules"] if "record" in r}
        assert not records & {"specpair:break_even_tau", "specpair:modelled_speedup"}
        assert "break_even_tau" not in yaml.safe_dump(groups)
        assert "Omitted, the break-even rules" in text
        assert "break-even τ* not modelled" in text


def cases() -> list[Any]:
    out = [pytest.param(path.read_bytes(), id=f"{path.parent.parent.name}/{path.name}")
           for path in sorted(REPO.glob("runbooks/*/generated/*.k8s.yaml"))]
    for name, make in VARIANTS.items():
        out += [pytest.param(text, id=f"{name}/{file}")
                for file, text in sorted(manifests(make()).items())]
    return out


@pytest.mark.parametrize("text", cases())
def test_every_manifest_passes_the_api_schemas_and_crds(text: bytes) -> None:
    docs = documents(text)
    assert docs
    for doc in docs:
        validate(doc)


def test_the_schemas_refuse_what_the_api_server_refuses() -> None:
    """The validators can fail: an unknown field (strict), a wrong type, a CRD's own rule."""
    files = launch_files.generate(Analysis(PAIRS["qwen3-8b-dflash"]))
    deployment = workload(files["deployment.k8s.yaml"])
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    server["resource"] = server.pop("resources")
    for minor in MINORS:
        with pytest.raises(jsonschema.ValidationError, match="resource"):
            validate_builtin(deployment, minor)
    server["resources"] = server.pop("resource")
    server["ports"][0]["containerPort"] = "http"
    with pytest.raises(jsonschema.ValidationError):
        validate(deployment)
    lws = workload(launch_files.generate(Analysis(vllm_two_nodes()))["deployment.k8s.yaml"])
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"  # not in the CRD's enum
    with pytest.raises(jsonschema.ValidationError, match="Always"):
        validate(lws)
    lws["spec"]["leaderWorkerTemplate"].pop("restartPolicy")
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "livenessProbes"] = []
    with pytest.raises(jsonschema.ValidationError, match="livenessProbes"):
        validate(lws)


def gib(quantity: str) -> int:
    assert quantity.endswith("Gi"), quantity
    return int(quantity[:-2])


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _scaled_object(name: str) -> dict[str, Any] | None:
    """The pair's generated ScaledObject (autoscaling.k8s.yaml), None where it has none."""
    text = (REPO / "runbooks" / name / "generated" / "autoscaling.k8s.yaml").read_bytes()
    return next(iter(documents(text)), None)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_single_node_pairs_roll_out_on_the_claims_they_generate(name: str) -> None:
    pair = PAIRS[name]
    docs = documents((REPO / "runbooks" / name / "generated" / "deployment.k8s.yaml")
                     .read_bytes())
    kinds = {d["kind"]: d for d in docs}
    deployment = kinds["Deployment"]
    # a rolling update would start a second whole-node pod on the same claim
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    (models,) = [v for v in pod["volumes"] if v["name"] == "models"]
    scaled = _scaled_object(name)
    if scaled is None:
        assert deployment["spec"]["replicas"] == 1
        claim = kinds["PersistentVolumeClaim"]
        assert models["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    else:
        # KEDA owns the replicas: a fixed count would reset them on every apply; and a
        # ReadWriteOnce claim attaches to one node, so each replica gets its own
        assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
        assert "replicas" not in deployment["spec"]
        assert scaled["spec"]["maxReplicaCount"] > 1
        assert "PersistentVolumeClaim" not in kinds
        claim = models["ephemeral"]["volumeClaimTemplate"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    # the claim holds what the budget says staging writes (budget.json, its own output)
    budget = json.loads((REPO / "runbooks" / name / "generated" / "budget.json").read_text())
    need = budget["storage"]["disk_needed_bytes"]
    assert gib(claim["spec"]["resources"]["requests"]["storage"]) == max(
        1, math.ceil(need / 2**30))
    (dshm,) = [v for v in pod["volumes"] if v["name"] == "dshm"]
    assert dshm["emptyDir"]["medium"] == "Memory"
    server = pod["containers"][0]
    assert set(server["resources"]["requests"]) == {"cpu", "memory"}
    # a full memory-backed /dev/shm counts toward the pod's memory: within the request
    assert gib(server["resources"]["requests"]["memory"]) > gib(dshm["emptyDir"]["sizeLimit"])
    assert server["resources"]["limits"]["nvidia.com/gpu"] == (
        pair.runbook.deployment.parallel.tensor * pair.runbook.deployment.parallel.pipeline
        * pair.runbook.deployment.parallel.data)
    assert server["livenessProbe"]["httpGet"]["path"] == "/health"
    ready = "/ready" if pair.engine.startswith("sglang") else "/health"
    # ready only once the canary gate wrote its marker, and the engine's endpoint answers
    probe = server["readinessProbe"]["exec"]["command"]
    assert probe[3:] == ["/specpair/state", str(served(server["command"])["port"]), ready]
    assert 'test -f "$$0/ready"' in probe[2]
    # the token reaches both the staging init container and the server
    gated = (pair.runbook.target.repo or "").startswith("meta-llama/")
    for container in (pod["initContainers"][0], server):
        ref = env_of(container)["HF_TOKEN"]["secretKeyRef"]
        assert ref == {"name": "hf-token", "key": "token", "optional": not gated}


@pytest.mark.parametrize(("autoscaling", "access", "shared", "replicas"), [
    (None, "ReadWriteOnce", True, 1),  # no autoscaler: one replica on one claim
    ({"max_replicas": 1}, "ReadWriteOnce", True, None),  # scaled, but never past one
    ({"max_replicas": 3}, "ReadWriteMany", True, None),  # one claim every node mounts
    ({"max_replicas": 3}, "ReadWriteOncePod", False, None),  # a claim per replica
])
def test_an_autoscaled_deployment_owns_no_replica_count_and_every_replica_can_attach(
        autoscaling: dict[str, int] | None, access: str, shared: bool,
        replicas: int | None) -> None:
    base = PAIRS["qwen3-8b-dflash"]
    deployment = base.runbook.deployment.model_dump(mode="json")
    deployment["autoscaling"] = None if autoscaling is None else {
        **deployment["autoscaling"], **autoscaling}
    pair = with_runbook(base, deployment=deployment,
                        kubernetes={"models_volume": {"access_mode": access}})
    text = manifests(pair)["deployment.k8s.yaml"]
    kinds = {d["kind"]: d for d in documents(text)}
    assert kinds["Deployment"]["spec"].get("replicas") == replicas
    for doc in kinds.values():
        validate(doc)
    (models,) = [v for v in kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]
                 if v["name"] == "models"]
    if shared:
        assert models["persistentVolumeClaim"]["claimName"] \
            == kinds["PersistentVolumeClaim"]["metadata"]["name"]
        assert kinds["PersistentVolumeClaim"]["spec"]["accessModes"] == [access]
    else:
        assert "PersistentVolumeClaim" not in kinds
        assert models["ephemeral"]["volumeClaimTemplate"]["spec"]["accessModes"] == [access]


def test_what_a_platform_sets_reaches_the_objects() -> None:
    pair = with_runbook(PAIRS["qwen3-8b-dflash"], kubernetes=PLATFORM)
    files = manifests(pair)
    docs = {d["kind"]: d for d in documents(files["deployment.k8s.yaml"])}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == PLATFORM["node_selector"]
    assert all("HF_TOKEN" not in env_of(c) for c in pod["initContainers"] + pod["containers"])
    (models,) = [v for v in pod["volumes"] if v["name"] == "models"]
    claim = models["ephemeral"]["volumeClaimTemplate"]["spec"]  # autoscaled: per replica
    assert claim["storageClassName"] == "fast-nvme"
    assert claim["resources"]["requests"]["storage"] == "500Gi"
    (dshm,) = [v for v in pod["volumes"] if v["name"] == "dshm"]
    assert dshm["emptyDir"]["sizeLimit"] == "32Gi"
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "12", "memory": "96Gi"}
    assert "Pod requests derived" not in files["deployment.k8s.yaml"].decode()
    for doc in documents(files["monitoring.k8s.yaml"]):
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"


@pytest.mark.parametrize("make", [sglang_two_nodes, vllm_two_nodes], ids=["sglang", "vllm"])
def test_multi_node_groups_stage_per_pod_and_only_the_leader_serves(make: Any) -> None:
    pair = make()
    lws = workload(launch_files.generate(Analysis(pair))["deployment.k8s.yaml"])
    template = lws["spec"]["leaderWorkerTemplate"]
    (claim,) = template["volumeClaimTemplates"]
    # one claim per pod: every node's init container stages its own copy, so RWO works
    assert claim["metadata"]["name"] == "models"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] == 0
    leader = template["leaderTemplate"]["spec"]
    worker = template["workerTemplate"]["spec"]
    for pod in (leader, worker):
        assert "models" not in [v["name"] for v in pod["volumes"]]
        assert "models" in [m["name"] for m in pod["containers"][0]["volumeMounts"]]
    assert {"startupProbe", "livenessProbe", "readinessProbe"} <= leader["containers"][0].keys()
    assert "livenessProbe" not in worker["containers"][0]
    leader_argv, worker_argv = leader["containers"][0]["command"], worker["containers"][0][
        "command"]
    assert "--headless" not in leader_argv
    # vLLM starts ranks > 0 headless (vllm/entrypoints/cli/serve.py: run_headless)
    assert ("--headless" in worker_argv) == pair.engine.startswith("vllm")


def test_the_vllm_script_starts_ranks_above_zero_headless(tmp_path: Path) -> None:
    script = launch_files.generate(Analysis(vllm_two_nodes()))["launch-vllm.sh"].decode()
    for rank, headless in (("0", False), ("1", True)):
        result = run_script(script, tmp_path, "vllm",
                            {"NODE_RANK": rank, "MASTER_ADDR": "127.0.0.1"})
        assert result.returncode == 0, result.stderr
        argv = json.loads((tmp_path / "argv.json").read_text())
        assert ("--headless" in argv) == headless
        assert argv[argv.index("--node-rank") + 1] == rank


def pod_of(pair: ResolvedPair) -> tuple[dict[str, Any], str]:
    text = launch_files.generate(Analysis(pair))["deployment.k8s.yaml"].decode()
    for doc in documents(text.encode()):
        validate(doc)
    spec = workload(text.encode())["spec"]
    template = spec["template"] if "template" in spec else \
        spec["leaderWorkerTemplate"]["workerTemplate"]
    return template["spec"], text


def requests_of(pod: dict[str, Any]) -> tuple[float, int, int]:
    """(CPU cores, memory GiB, /dev/shm GiB) of the server pod."""
    requests = pod["containers"][0]["resources"]["requests"]
    (dshm,) = [v for v in pod["volumes"] if v["name"] == "dshm"]
    return float(requests["cpu"]), gib(requests["memory"]), gib(dshm["emptyDir"]["sizeLimit"])


@pytest.mark.parametrize("make", [
    lambda: PAIRS["qwen3-8b-dflash"], sglang_two_nodes, vllm_two_nodes,
    lambda: with_runbook(PAIRS["qwen3-8b-dflash"], kubernetes={"shm_size": "24Gi"})],
    ids=["one-rank", "sglang-2x4-ranks", "vllm-2x4-ranks", "shm-set"])
def test_pod_requests_grow_with_the_ranks_and_hold_the_shm(make: Any) -> None:
    """Left to specpair, a pod running more GPU ranks (NCCL peers, worker processes) asks
    for more CPU, memory and /dev/shm than a one-rank pod, every derived memory request
    holds the /dev/shm it mounts, and the manifest says how the numbers were chosen."""
    pair = make()
    pod, text = pod_of(pair)
    cpu, memory, shm = requests_of(pod)
    one_cpu, one_memory, one_shm = requests_of(pod_of(PAIRS["qwen3-8b-dflash"])[0])
    ranks = pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    if ranks > 1:
        assert cpu > one_cpu and memory > one_memory and shm > one_shm
    assert memory > shm
    assert "Pod requests derived from the GPU ranks per pod" in text
    if pair.runbook.kubernetes.shm_size is not None:
        assert shm == gib(pair.runbook.kubernetes.shm_size)
        assert memory - shm == one_memory - one_shm, "the set /dev/shm is added to memory"


def test_a_memory_request_below_the_shm_size_is_refused_by_field() -> None:
    pair = with_runbook(PAIRS["qwen3-8b-dflash"],
                        kubernetes={"memory_request": "8Gi", "shm_size": "16Gi"})
    with pytest.raises(SpecpairError) as caught:
        launch_files.generate(Analysis(pair))
    (problem,) = caught.value.problems
    assert problem.location.field == "kubernetes.memory_request"
    assert problem.location.file.startswith("runbooks/qwen3-8b-dflash/runbook.")
    assert "below the /dev/shm size 16Gi" in problem.message
    assert "shm_size" in problem.hint


def test_quantities_compare_as_kubernetes_reads_them() -> None:
    """Kubernetes' "Resource Management for Pods and Containers" page: 128974848, 129e6,
    129M, 128974848000m and 123Mi are (roughly) the same memory; 0.1 CPU is 100m."""
    from specpair.generate.pod_resources import quantity

    assert quantity("123Mi") == quantity("128974848") == quantity("128974848000m")
    assert quantity("129e6") == quantity("129M") == 129_000_000
    assert quantity("0.1") == quantity("100m")
    assert quantity("2Gi") > quantity("2G")
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("2GB")


LONGEST = "a" * 54 + "-" + "b" * 9  # 64 characters: the longest pair name (a slug)


def _named(make: Any, name: str) -> ResolvedPair:
    pair = make()
    data = pair.runbook.model_dump(mode="json")
    data["pair"]["name"] = name
    return pair.model_copy(update={"name": name,
                                   "runbook": pair.runbook.model_validate(data)})


@pytest.mark.parametrize("make", [lambda: PAIRS["qwen3-8b-dflash"], vllm_two_nodes,
                                  sglang_two_nodes], ids=["one-node", "vllm-2", "sglang-2"])
def test_the_longest_pair_name_gives_objects_the_api_accepts(make: Any) -> None:
    pair = _named(make, LONGEST)
    assert len(pair.name) == 64
    texts = manifests(pair)
    docs = [d for text in texts.values() for d in documents(text)]
    assert {d["kind"] for d in docs} >= {"PodMonitor", "PrometheusRule"}
    for doc in docs:
        validate(doc)
        assert api_name_problems(doc) == [], doc["kind"]
    pods = workload(texts["deployment.k8s.yaml"])
    spec = pods["spec"]
    templates = ([spec["template"]] if pods["kind"] == "Deployment" else
                 [spec["leaderWorkerTemplate"]["leaderTemplate"]])
    (monitor,) = [d for d in docs if d["kind"] == "PodMonitor"]
    selected = {k: v for k, v in monitor["spec"]["selector"]["matchLabels"].items()
                if k.startswith("app.kubernetes.io/")}  # LWS adds its worker index itself
    assert selected
    for template in templates:  # the PodMonitor still selects the pods
        assert selected.items() <= template["metadata"]["labels"].items()
    if pods["kind"] == "Deployment":
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"][
            "labels"].items()


def test_long_names_sharing_a_prefix_stay_apart() -> None:
    first, second = (workload(manifests(_named(vllm_two_nodes, LONGEST[:-1] + c))[
        "deployment.k8s.yaml"]) for c in "xy")
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert first["metadata"]["labels"] != second["metadata"]["labels"]


def test_a_name_within_the_limits_is_kept_as_written() -> None:
    pair = _named(vllm_two_nodes, "a" * 50)  # the longest group name that fits
    doc = workload(manifests(pair)["deployment.k8s.yaml"])
    assert doc["metadata"]["name"] == "a" * 50
    assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "a" * 50
