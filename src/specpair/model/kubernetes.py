"""What a platform decides about a pair's Kubernetes objects (runbook section `kubernetes`).

Everything else in the manifests follows from the runbook and the budget; these are the
cluster's own conventions (where tokens live, which storage and nodes to use, which labels
its Prometheus operator selects on), so the runbook names them instead of specpair guessing.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from specpair.model.common import PositiveInt, Strict

# the API server's own validation patterns (DNS-1123 subdomain, label key and value,
# Secret data key, resource.Quantity)
DNSName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]
LabelKey = Annotated[str, StringConstraints(
    pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", max_length=316)]
LabelValue = Annotated[str, StringConstraints(
    pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")]
PrometheusURL = Annotated[str, StringConstraints(pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
                                                 max_length=2048)]
SecretKey = Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]{1,253}$")]
Quantity = Annotated[str, StringConstraints(
    pattern=r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
            r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")]


LABEL_VALUE_MAX = 63
"""A label value's limit (k8s.io/apimachinery/pkg/util/validation: LabelValueMaxLength)."""
GROUP_NAME_MAX = 63 - len("-0") - len("-") - 10
"""A LeaderWorkerSet's name: its group 0 runs as the StatefulSet `<name>-0`, whose pods
carry the label controller-revision-hash `<name>-0-<10-character hash>`, a label value
(kubernetes/kubernetes#64023); a longer name leaves the group's pods uncreatable."""


def bounded(name: str, limit: int) -> str:
    """`name` where it fits `limit` characters, else its start and 8 hexadecimal digits of
    its SHA-256: the same pair gets the same object names in every build, and two pairs
    that share a long prefix still get different ones."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - len(digest) - 1].rstrip('-.')}-{digest}"


def workload_name(pair: str, nodes: int) -> str:
    """The name of the pair's Deployment (one node) or LeaderWorkerSet (several)."""
    return bounded(pair, LABEL_VALUE_MAX if nodes == 1 else GROUP_NAME_MAX)


def pair_labels(pair: str) -> dict[str, str]:
    """The labels of a pair's objects and pods, which the PodMonitor selects on."""
    return {"app.kubernetes.io/name": bounded(pair, LABEL_VALUE_MAX),
            "app.kubernetes.io/managed-by": "specpair"}

class TokenSecret(Strict):
    """The Secret holding a Hugging Face token, given to the staging init container and the
    server as HF_TOKEN (gated repos such as meta-llama/* answer 401 without one)."""

    name: DNSName = Field(default="hf-token", description="Secret name, in the pair's namespace")
    key: SecretKey = Field(default="token", description="key in the Secret's data")
    optional: bool = Field(
        default=True, description="true: the pod starts without the Secret (public repos); "
        "false: the pod waits for it, as a gated repo needs")


class ModelsVolume(Strict):
    """The `<pair>-models` PersistentVolumeClaim that holds the hub cache (HF_HOME)."""

    size_gib: PositiveInt | None = Field(
        default=None, description="claim size in GiB; default: the budget's disk need (both "
        "downloads + 10%), rounded up")
    storage_class: DNSName | None = Field(
        default=None, description="storageClassName; default: the cluster's default class")
    access_mode: Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"] = Field(
        default="ReadWriteOnce", description="each pod gets its own claim (multi-node pairs "
        "too: every node stages its own copy), so ReadWriteOnce suffices")


class Kubernetes(Strict):
    hf_token_secret: TokenSecret | None = Field(
        default=TokenSecret(), description="null: no token is given to the pods")
    models_volume: ModelsVolume = ModelsVolume()
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="nodeSelector for the GPU the budget assumes, e.g. "
        "GPU feature discovery's nvidia.com/gpu.product; empty: any node with the GPUs")
    cpu_request: Quantity | None = Field(
        default=None, description="CPU request of the server pod; default: 2 per GPU rank in "
        "the pod + 2 for the API server, tokenizer and detokenizer (platform defaults)")
    memory_request: Quantity | None = Field(
        default=None, description="memory request of the server pod, /dev/shm included (a "
        "memory-backed emptyDir counts toward the pod's memory; a request below shm_size is "
        "refused); default: 8Gi per GPU rank in the pod (a platform default: specpair "
        "launches use no CPU offload, host KV cache or swap) + the /dev/shm size")
    shm_size: Quantity | None = Field(
        default=None, description="sizeLimit of the memory-backed /dev/shm (NCCL's shared-"
        "memory transport, the engine's worker queues); default: 2Gi per GPU rank in the "
        "pod (a platform default)")
    monitor_labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="extra labels on the PrometheusRule and PodMonitor, "
        "for the operator's ruleSelector/podMonitorSelector (kube-prometheus-stack: release)")
    prometheus_url: PrometheusURL = Field(
        default="http://prometheus-operated.monitoring.svc:9090", description="the Prometheus "
        "the autoscaler queries (KEDA's serverAddress): one that evaluates the pair's rules; "
        "default: the prometheus-operator's governing Service in the namespace monitoring")


__all__ = ["Kubernetes", "ModelsVolume", "TokenSecret"]
