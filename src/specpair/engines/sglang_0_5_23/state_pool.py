"""SGLang 0.5.23: the per-request state pool of a linear-attention hybrid target (KDA,
Gated DeltaNet), which the engine carves out of the rest before it sizes the KV pool
(step 5 of `budget.py`; `mem_cache/kv_cache_configurator.py::_handle_max_mamba_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass

from specpair.engines import engine_lists
from specpair.engines.sglang_0_5_23.args import DEFAULTS, Defaults
from specpair.model.budget import Line, line
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry, LinearAttention
from specpair.model.runbook import Runbook


@dataclass(frozen=True)
class StatePlan:
    """A hybrid's state pool: its slots and bytes, taken before the KV pool."""

    per_slot: int
    slots: int
    pool_bytes: int
    intermediate_bytes: int
    ratio: int
    lines: list[Line]


def _state_sizes(g: Geometry, attn_tp: int, ssm_bytes: int, ring_len: int | None,
                 engine: str) -> tuple[int, int]:
    la = g.linear_attention
    assert la is not None
    if la.kind == "gdn":
        return _gdn_state_size(la, attn_tp, ssm_bytes, ring_len, engine), 0
    if la.kind != "kda":
        raise SpecpairError.single(
            "runbook", f"not modelled: the {la.kind} state pool for {engine}",
            "only KDA and Gated DeltaNet hybrids are modelled; budget this pair by "
            "measurement", field_path="target")
    h_rank, d = la.num_heads // attn_tp, la.head_dim
    conv = (la.conv_kernel - 1) * (3 * la.num_heads * d // attn_tp) * 2  # bf16 conv windows
    ssm = h_rank * d * d * ssm_bytes
    state = (conv + ssm) * la.layers
    ring = 0
    if ring_len:
        # d, k, rawv, rawk in bf16; g (per-K gate) and beta in fp32 (mamba_utils.py:127)
        ring = (4 * h_rank * ring_len * d * 2 + h_rank * ring_len * d * 4
                + h_rank * ring_len * 4) * la.layers
    return state, ring


def _gdn_state_size(la: LinearAttention, attn_tp: int, ssm_bytes: int,
                    ring_len: int | None, engine: str) -> int:
    """Gated DeltaNet (Qwen3-Next): `Qwen3NextConfig.mamba2_cache_params` →
    `Mamba2StateShape.create`: conv windows over q, k and v (bf16), an SSM state of
    value heads × value head size × key head size per layer, both split over attn-TP."""
    key_heads = la.num_key_heads or la.num_heads
    key_dim = la.key_head_dim or la.head_dim
    if ring_len:
        raise SpecpairError.single(
            "runbook", f"not modelled: the Gated DeltaNet ReplaySSM scratch on {engine}",
            "set deployment.linear_state.replay_spec: false",
            field_path="deployment.linear_state.replay_spec")
    if key_heads % attn_tp or la.num_heads % attn_tp:
        raise SpecpairError.single(
            "runbook", f"not modelled: {key_heads} key / {la.num_heads} value heads that do "
            f"not split over attn-TP {attn_tp} (the engine pads the groups)",
            "use a tensor-parallel size that divides both head counts",
            field_path="deployment.parallel.tensor")
    conv_dim = la.num_heads * la.head_dim + 2 * key_heads * key_dim
    conv = conv_dim // attn_tp * (la.conv_kernel - 1) * 2
    ssm = la.num_heads // attn_tp * la.head_dim * key_dim * ssm_bytes
    return (conv + ssm) * la.layers


def state_plan(rb: Runbook, g: Geometry, attn_tp: int, rest_gib: float, speculative: bool,
               verify: int, max_running: int, defaults: Defaults = DEFAULTS
               ) -> tuple[float, StatePlan]:
    """`KVCacheConfigurator._handle_max_mamba_cache`: returns rest after the state pool."""
    ls = rb.deployment.linear_state
    replay = speculative and ls.replay_spec
    # --mamba-ssm-dtype, else (GDN: Qwen3NextConfig passes itself to mamba2_state_dtype)
    # the config's mamba_ssm_dtype, else float32; Bailing ignores the config key
    la = g.linear_attention
    ssm_dtype = ls.ssm_dtype or (la.ssm_dtype if la is not None and la.kind == "gdn"
                                 else None) or "float32"
    ssm_bytes = {"float32": 4, "bfloat16": 2, "float16": 2}[ssm_dtype]
    state, ring = _state_sizes(g, attn_tp, ssm_bytes, ls.replay_cache_len if replay else None,
                               defaults.engine)
    if ls.disable_radix_cache:
        ratio = 1
    else:
        strategy = ls.radix_cache_strategy
        if strategy == "auto":
            # the release's _MAMBA_EXTRA_BUFFER_ARCHS (arg_groups/overrides.py), with the overlap
            # scheduler on and the triton linear-attention backend
            extra = engine_lists.of(defaults.engine).extra_buffer
            strategy = "extra_buffer" if g.architecture in extra else "no_buffer"
        ratio = 5 if strategy == "extra_buffer" else 3  # base 3 + 2 tracking slots (overlap)
    r = ls.full_memory_ratio or defaults.mamba_full_memory_ratio.resolved
    reserves_spec_state = speculative and not replay
    per_slot = state + ring
    intermediate = 0
    rest = rest_gib
    if ls.max_cache_size is not None:
        slots, how = ls.max_cache_size, "--max-mamba-cache-size"
        if reserves_spec_state:
            capped = min(max(1, max_running), slots // ratio)
            intermediate = state * (capped + 1) * verify
    elif ls.disable_radix_cache:
        slots, how = max(1, max_running), "max_running_requests (radix cache off)"
        if reserves_spec_state:
            intermediate = state * (slots + 1) * verify
    else:
        budget = rest * r / (1 + r) * (1 << 30)
        if reserves_spec_state:
            slots = int((budget - state * (1 + verify)) // (state * (1 + verify / ratio)))
            capped = min(max(1, max_running), slots // ratio)
            intermediate = state * (capped + 1) * verify
            how = f"r/(1+r) of rest, r = {r}, with the recurrent-verify reserve"
        else:
            slots = int((budget - per_slot) // per_slot)
            how = f"r/(1+r) of rest, r = {r}"
    rest -= intermediate / (1 << 30)
    pool = (slots + 1) * per_slot
    rest -= pool / (1 << 30)
    rule = f"{defaults.engine} kv_cache_configurator.py::_handle_max_mamba_cache"
    linear_layers = g.linear_attention.layers if g.linear_attention else 0
    lines = [
        line(key="state_per_slot", label="linear-attention state per slot", value=state,
             unit="B", rule=f"(conv bf16 + SSM {ssm_dtype}) · {linear_layers} "
                            "linear layers, heads split by attn_tp"),
        line(key="replay_ring_per_slot", label="ReplaySSM ring per slot", value=ring, unit="B",
             rule=f"KDA ring of {ls.replay_cache_len} records per slot" if replay
             else "ReplaySSM-spec off: no ring"),
        line(key="state_slots", label="state slots K (max_mamba_cache_size)", value=slots,
             unit="slots", rule=f"{how}; {rule}"),
        line(key="state_pool", label="state pool (K + 1 slots)", value=pool, unit="B",
             rule="(K + 1) · per-slot bytes, taken before the KV pool"),
        line(key="spec_intermediate", label="recurrent-verify intermediate reserve",
             value=intermediate, unit="B",
             rule="state · (min(max_running, K // ratio) + 1) · verify width"
             if reserves_spec_state else "not reserved (no speculation, or ReplaySSM-spec)"),
        line(key="slots_per_request", label="state slots per running request", value=ratio,
             unit="slots", rule="1 without radix cache; 3 no_buffer; 5 extra_buffer with the "
                                "overlap scheduler"),
    ]
    if slots <= 0:
        lines.append(line(key="state_error", label="start-up fails", value="no state slots",
                          unit="", rule="'Not enough GPU memory for hybrid … state cache'"))
    return rest, StatePlan(per_slot, slots, pool, intermediate, ratio, lines)
