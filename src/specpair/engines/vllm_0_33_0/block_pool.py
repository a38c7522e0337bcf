"""vLLM 0.33.0: the layers' pages in the shared KV block pool and how the pool lays them
out, before any memory is counted (vllm 0.33.0: `vllm/v1/kv_cache_interface.py`,
`vllm/v1/core/kv_cache_planning.py::get_kv_cache_groups`).

One block id addresses `block_size` tokens in every layer, so a block costs each layer's
page: `LayerSpec` is one attention layer's spec, `BlockPlan` the KV cache groups the layers
fall into. Gated DeltaNet state layers keep a fixed-size state per request in the same pool
(`StatePlan`, `gdn_state_bytes`). Which groups a release forms and how it aligns the state
are the release's rules (`budget.Rules`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from specpair.engines import engine_lists
from specpair.engines.kv_arithmetic import kv_heads_per_rank, model_dtype_bytes
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry

# FLASH_ATTN (the attention backend on Hopper) runs kernel blocks of MultipleOf(16)
# (flash_attn.py, get_supported_kernel_block_sizes)
ATTENTION_KERNEL_BLOCK = 16
# Prefix caching is on by default for hybrids (ModelConfig.is_prefix_caching_supported),
# which puts the state cache in mode `align` (MambaModelConfig.verify_and_update_config);
# there the GDN layers on Hopper prefill with FlashInfer and checkpoint the state every
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT tokens (gdn_attn.py), so blocks are a multiple of it
GDN_CHECKPOINT_ALIGNMENT = 64
STATE_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def page_bytes(g: Geometry, tp: int, block: int, dtype_bytes: int) -> tuple[int, str]:
    """`kv_cache_interface` page size of one layer for one block."""
    if g.attention == "mla":
        page = block * g.mla_latent_dim * dtype_bytes
        return page, f"MLA: {block} · {g.mla_latent_dim} · {dtype_bytes} B (not split by TP)"
    heads = kv_heads_per_rank(g.num_key_value_heads, tp)
    page = heads * block * (g.head_dim + g.v_head_dim) * dtype_bytes
    return page, (f"{heads} KV heads · {block} tokens · ({g.head_dim} + {g.v_head_dim}) · "
                  f"{dtype_bytes} B")


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer's KV cache spec, as `Attention.get_kv_cache_spec` builds it."""

    kind: Literal["full", "sliding", "chunked", "state"]
    page: int
    window: int | None
    shape: tuple[int, int, int, int]
    """(KV heads per rank, head size, v head size, dtype bytes): equal shapes, equal spec"""


@dataclass(frozen=True)
class BlockPlan:
    """`kv_cache_planning.get_kv_cache_groups` + `get_kv_cache_config_from_groups`."""

    groups: list[tuple[str, int, int, int | None]]
    """(kind, layers, page bytes, window) per KV cache group"""
    bytes_per_block: int
    rule: str
    state_blocks: int = 0
    """blocks each linear-attention state group keeps per request"""

    def blocks_per_request(self, context: int, block: int, in_flight: int) -> int:
        """`get_max_concurrency_for_kv_cache_config`: blocks one request at `context`
        takes across groups (full: cdiv(L, block); sliding: cdiv(min(window − 1 +
        in-flight tokens, L), block) + 1; chunked: cdiv(min(chunk + in-flight tokens, L),
        block), ChunkedLocalAttentionSpec.max_admission_blocks_per_request)."""
        total = 0
        for kind, _, _, window in self.groups:
            if kind == "state":
                total += self.state_blocks
            elif kind == "sliding" and window is not None:
                total += math.ceil(min(window - 1 + in_flight, context) / block) + 1
            elif kind == "chunked" and window is not None:
                total += math.ceil(min(window + in_flight, context) / block)
            else:
                total += math.ceil(context / block)
        return total


def layer_specs(g: Geometry, tp: int, block: int, dtype_bytes: int) -> list[LayerSpec]:
    page, _ = page_bytes(g, tp, block, dtype_bytes)
    if g.attention == "mla":
        shape = (1, g.mla_latent_dim, 0, dtype_bytes)
    else:
        shape = (kv_heads_per_rank(g.num_key_value_heads, tp), g.head_dim, g.v_head_dim,
                 dtype_bytes)
    # in layer order, as the model registers its attention layers; a spec is frozen and
    # its value is (kind, window) here, so equal layers share one (the planner budgets
    # hundreds of variants of 60-80-layer models)
    made: dict[tuple[str, int | None], LayerSpec] = {}
    return [made.get((layer.kind, layer.window)) or made.setdefault(
                (layer.kind, layer.window), LayerSpec(layer.kind, page, layer.window, shape))
            for layer in g.layer_list() if layer.kind != "linear"]


@dataclass(frozen=True)
class StatePlan:
    """Gated DeltaNet state in the block pool, after the platform's block alignment."""

    block: int
    """attention block size, raised so that one attention page holds a state page"""
    state_bytes: int
    """one layer's state (conv window + SSM state) per request, before padding"""
    blocks_per_request: int
    rule: str


def gdn_state_bytes(g: Geometry, tp: int, num_spec: int, engine: str) -> tuple[int, str]:
    """`MambaSpec.page_size_bytes` of one GDN layer: the shapes of
    `MambaStateShapeCalculator.gated_delta_net_state_shape` (conv window over q, k and v,
    widened by the draft tokens; value heads × value head size × key head size), the
    dtypes of `gated_delta_net_state_dtype` (conv: the model's; SSM: `auto` follows it,
    or the config's `mamba_ssm_dtype` for the architectures whose config hook says so:
    the release's engine_lists.yaml `ssm_dtype_from_config`)."""
    la = g.linear_attention
    assert la is not None
    key_heads = la.num_key_heads or la.num_heads
    key_dim = la.key_head_dim or la.head_dim
    if key_heads % tp or la.num_heads % tp:
        raise SpecpairError.single(
            "runbook", f"not modelled: {key_heads} key / {la.num_heads} value heads that do "
            f"not split over TP {tp}", "use a tensor-parallel size that divides both",
            field_path="deployment.parallel.tensor")
    conv_bytes = model_dtype_bytes(g)
    from_config = engine_lists.of(engine).ssm_dtype_from_config
    ssm_dtype = la.ssm_dtype if g.architecture in from_config else None
    ssm_bytes = STATE_DTYPE_BYTES[ssm_dtype] if ssm_dtype else conv_bytes
    conv_dim = key_dim * key_heads * 2 + la.head_dim * la.num_heads
    conv = conv_dim // tp * (la.conv_kernel - 1 + num_spec) * conv_bytes
    ssm = la.num_heads // tp * la.head_dim * key_dim * ssm_bytes
    return conv + ssm, (f"conv {conv_dim // tp} · ({la.conv_kernel} − 1 + {num_spec}) · "
                        f"{conv_bytes} B + SSM {la.num_heads // tp} · {la.head_dim} · "
                        f"{key_dim} · {ssm_bytes} B")
