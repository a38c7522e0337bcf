"""The server pod's CPU and memory requests and its /dev/shm size: the runbook's
`kubernetes` values where it sets them, else derived from the GPU ranks the pod runs.

What the budget knows is how many GPU ranks (worker processes) share the pod, and that
the memory-backed /dev/shm counts toward the pod's memory (Kubernetes charges a
`medium: Memory` emptyDir to the pod's memory). What each rank needs on the host is no
engine figure: specpair launches use none of the engines' large host allocations (CPU
weight offload, host KV cache, swap), so the per-rank amounts below are platform
defaults, stated as such in the schema and in the manifest's notes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal

from specpair.model.errors import Problem, SpecpairError
from specpair.resolve.pair import ResolvedPair

CPU_PER_RANK = 2
"""Platform default: cores per GPU worker process (its scheduler and CUDA launch thread)."""
CPU_SERVER = 2
"""Platform default: cores for the API server, tokenizer and detokenizer processes."""
MEMORY_PER_RANK_GIB = 8
"""Platform default: host memory per GPU worker process (CUDA context, PyTorch, the
engine's CPU-side state), on top of /dev/shm."""
SHM_PER_RANK_GIB = 2
"""Platform default: /dev/shm per GPU rank (NCCL's shared-memory transport and the
engine's worker queues grow with the ranks in the pod)."""

_SUFFIX = {"": Decimal(1), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
           "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18),
           "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
           "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
           "m": Decimal("0.001"), "u": Decimal("0.000001"), "n": Decimal("0.000000001")}
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|([a-zA-Z]*))$")


def quantity(text: str) -> Decimal:
    """A Kubernetes resource.Quantity as a number (bytes for memory, cores for CPU)."""
    match = _QUANTITY.match(text)
    if match is None or (match.group(3) or "") not in _SUFFIX:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, exponent, suffix = match.groups()
    if exponent:
        return Decimal(number + exponent)
    return Decimal(number) * _SUFFIX[suffix or ""]


@dataclass(frozen=True)
class PodResources:
    cpu: str
    memory: str
    shm: str
    notes: list[str]


def ranks_per_pod(pair: ResolvedPair) -> int:
    """GPU ranks in one pod: each node of a multi-node group is one pod."""
    p = pair.runbook.deployment.parallel
    return p.tensor * p.pipeline * p.data // pair.runbook.deployment.nodes


def pod_resources(pair: ResolvedPair) -> PodResources:
    k8s = pair.runbook.kubernetes
    g = ranks_per_pod(pair)
    derived: list[str] = []
    shm = k8s.shm_size
    if shm is None:
        shm = f"{SHM_PER_RANK_GIB * g}Gi"
        derived.append(f"/dev/shm {shm} = {SHM_PER_RANK_GIB}Gi per GPU rank × {g}")
    memory = k8s.memory_request
    if memory is None:
        host = MEMORY_PER_RANK_GIB * g
        shm_gib = quantity(shm) / 2**30
        total = host + math.ceil(shm_gib)  # whole GiB, rounded up
        memory = f"{total}Gi"
        derived.append(f"memory {memory} = {MEMORY_PER_RANK_GIB}Gi per GPU rank × {g} + "
                       f"/dev/shm {shm}")
    elif quantity(memory) < quantity(shm):
        raise SpecpairError([Problem(
            pair.location("kubernetes.memory_request"),
            f"memory_request {memory} is below the /dev/shm size {shm}: the memory-backed "
            "/dev/shm counts toward the pod's memory, so a full /dev/shm alone would exceed "
            "the request", "raise kubernetes.memory_request above kubernetes.shm_size (or "
            "leave it out: it is then derived), or lower kubernetes.shm_size")])
    cpu = k8s.cpu_request
    if cpu is None:
        cpu = str(CPU_PER_RANK * g + CPU_SERVER)
        derived.append(f"cpu {cpu} = {CPU_PER_RANK} per GPU rank × {g} + {CPU_SERVER} for "
                       "the API server, tokenizer and detokenizer")
    notes = []
    if derived:
        notes.append("Pod requests derived from the GPU ranks per pod (platform defaults, "
                     "not engine figures; kubernetes.cpu_request, memory_request and shm_size "
                     "set them): " + "; ".join(derived) + ".")
    return PodResources(cpu=cpu, memory=memory, shm=shm, notes=notes)
