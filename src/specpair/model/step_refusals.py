"""Deployments the step model does not represent, refused by name on the same path for a
calibration point and a runbook (the load-time rules ask it before any analysis runs)."""

from __future__ import annotations


class NotModelled(ValueError):
    """A deployment the step model does not represent: refused by name, never predicted."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


CROSS_NODE_MODEL_PARALLEL = "cross-node model parallelism"
CROSS_NODE_EXPERT_PARALLEL = "cross-node expert parallelism"


def deployment_refusal(tp: int, pp: int, ep: int, gpus_per_node: int,
                       dp_attention: bool = False) -> NotModelled | None:
    """Why the step model refuses a deployment, or None where it represents it.

    Its links (`LINKS`) are those between the GPUs of one node (NVLink, xGMI, PCIe). A
    tensor-parallel group wider than a node all-reduces over the inter-node network
    (InfiniBand/RoCE, or a rack-scale NVLink switch), and pipeline stages on different
    nodes pass their activations over it: the model has no bandwidth or latency figure
    for that network. Expert parallelism wider than a node, or the MoE layers of SGLang's
    DP attention (whose ranks each hold a whole attention and share the experts) spread
    over more than a node, dispatch tokens to experts all-to-all across nodes (DeepEP), a
    cost the model has no term for at all (it times all-reduces only). Each is refused by
    name, on the same path for a calibration point and a runbook."""
    moe_ranks = max(ep, tp) if dp_attention else ep
    if dp_attention and moe_ranks > gpus_per_node:  # its attention is not tensor-parallel
        return _cross_node_experts(moe_ranks, gpus_per_node)
    if tp > gpus_per_node:
        return NotModelled(CROSS_NODE_MODEL_PARALLEL, (
            f"tensor parallelism {tp} spans more than one node's {gpus_per_node} GPUs: its "
            "all-reduces cross the inter-node network, for which the step model has no "
            "link figure"))
    if tp * pp > gpus_per_node:
        return NotModelled(CROSS_NODE_MODEL_PARALLEL, (
            f"tensor × pipeline parallelism {tp} × {pp} spans more than one node's "
            f"{gpus_per_node} GPUs: pipeline stages on different nodes pass their "
            "activations over the inter-node network, for which the step model has no "
            "link figure"))
    if moe_ranks > gpus_per_node:
        return _cross_node_experts(moe_ranks, gpus_per_node)
    return None


def _cross_node_experts(ranks: int, gpus_per_node: int) -> NotModelled:
    return NotModelled(CROSS_NODE_EXPERT_PARALLEL, (
        f"expert parallelism over {ranks} GPUs spans more than one node's "
        f"{gpus_per_node}: the all-to-all dispatch of tokens to experts across nodes "
        "is not in the step model"))
