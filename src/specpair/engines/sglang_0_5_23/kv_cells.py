"""SGLang 0.5.23: the bytes one token takes in each KV pool, as the pool configurator
charges them (`mem_cache/pool_configurator.py`), before any memory is counted.

The engine picks DefaultPoolConfigurator, or HybridSWAPoolConfigurator for the hybrid
sliding-window architectures (a full pool and a SWA pool). The draft's cell is the layer
scaling of the target cell (EAGLE family) or the draft's own geometry and KV dtype
(DFLASH/DSPARK); NGRAM has none. `pool_sizing.py` sizes the pools from these cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specpair.engines import engine_lists
from specpair.engines.kv_arithmetic import kv_bytes, kv_heads_per_rank, kv_layers
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23.args import DEFAULTS, Defaults
from specpair.model.common import KVDtype, Method
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry


def uses_hybrid_swa_pools(g: Geometry, enabled: bool, engine: str) -> bool:
    """Whether the engine splits this target's KV into a full and a SWA pool: the
    release's `is_hybrid_swa_model` architectures (engine_lists.yaml, read from its
    configs/model_config.py), with their SWA layers placed by `get_hybrid_layer_ids`.
    Other sliding-window models (Gemma 3, ...) go through DefaultPoolConfigurator, every
    layer at full length; so does any model under --disable-hybrid-swa-memory."""
    rule = engine_lists.of(engine).hybrid_swa.get(g.architecture)
    if not enabled or rule is None:
        return False
    if rule == "every_fourth_full":
        # Llama 4: chunked local attention in the SWA pool, every 4th layer full
        # (get_hybrid_layer_ids; load_model_utils.py::resolve_sliding_window_size)
        kinds = [layer.kind for layer in g.layer_list() if layer.kind != "linear"]
        if swa_layers(g) and kinds != ["full" if (i + 1) % 4 == 0 else kinds[i]
                                       for i in range(len(kinds))]:
            raise _own_rule(g, engine, "every 4th layer full, the others in the SWA pool")
    elif rule != "layer_types":
        raise _own_rule(g, engine, "a rule of its own (not the config's layer_types)")
    return swa_layers(g) > 0


def _own_rule(g: Geometry, engine: str, how: str) -> SpecpairError:
    return SpecpairError.single(
        "runbook", f"not modelled: {engine} gives {g.architecture} hybrid-SWA pools and "
        f"places its SWA layers by {how} (configs/model_config.py::get_hybrid_layer_ids)",
        "set deployment.hybrid_kv_pools: false (--disable-hybrid-swa-memory), or budget "
        "the pair by measurement", field_path="deployment.hybrid_kv_pools")


def swa_layers(g: Geometry) -> int:
    """Layers the hybrid-SWA configurator keeps in its SWA pool: sliding-window and
    chunked local attention layers."""
    return g.sliding_window_layers + g.chunked_attention_layers


def per_layer_cell(g: Geometry, attn_tp: int, dtype_bytes: int) -> int:
    """Bytes one token takes in one attention layer on one rank."""
    if g.attention == "mla":
        return g.mla_latent_dim * dtype_bytes
    return kv_heads_per_rank(g.num_key_value_heads, attn_tp) * (g.head_dim + g.v_head_dim) \
        * dtype_bytes


def target_cell(g: Geometry, attn_tp: int, pp: int, dtype_bytes: int,
                hybrid_swa: bool = False) -> tuple[int, str]:
    """Target bytes per token of the (full) pool; with hybrid-SWA pools only the full
    layers (the sliding ones are `swa_cell`)."""
    layers = math.ceil((g.full_attention_layers if hybrid_swa else kv_layers(g)) / pp)
    if g.attention == "mla":
        cell = g.mla_latent_dim * layers * dtype_bytes
        return cell, (f"MLA: (kv_lora_rank {g.kv_lora_rank} + qk_rope_head_dim "
                      f"{g.qk_rope_head_dim}) · {layers} layers · {dtype_bytes} B; the latent "
                      "is not split across TP")
    heads = kv_heads_per_rank(g.num_key_value_heads, attn_tp)
    cell = heads * (g.head_dim + g.v_head_dim) * layers * dtype_bytes
    return cell, (f"MHA/GQA: max(1, {g.num_key_value_heads} KV heads // attn_tp {attn_tp}) = "
                  f"{heads} · (head_dim {g.head_dim} + v_head_dim {g.v_head_dim}) · {layers} "
                  f"layers · {dtype_bytes} B")


def exact_draft_cell(g: Geometry, draft_attn_tp: int, dtype_bytes: int) -> tuple[int, str]:
    """`draft_kv_budget.resolve_dflash_draft_cell_size` (and what a draft runner allocates)."""
    if g.attention == "mla":
        cell = g.mla_latent_dim * kv_layers(g) * dtype_bytes
        return cell, f"MLA: {g.mla_latent_dim} · {kv_layers(g)} layers · {dtype_bytes} B"
    heads = kv_heads_per_rank(g.num_key_value_heads, draft_attn_tp)
    cell = heads * (g.head_dim + g.v_head_dim) * kv_layers(g) * dtype_bytes
    return cell, (f"max(1, {g.num_key_value_heads} // {draft_attn_tp}) = {heads} KV heads · "
                  f"({g.head_dim} + {g.v_head_dim}) · {kv_layers(g)} layers · {dtype_bytes} B")


def eagle_draft_layers(draft: Geometry) -> int:
    return draft.num_nextn_predict_layers or kv_layers(draft)


@dataclass(frozen=True)
class SwaSplit:
    """HybridSWAPoolConfigurator: sliding layers cost `ratio` of their bytes per full token
    (the SWA pool holds int(full tokens · ratio) tokens)."""

    ratio: float
    cell: int
    rule: str


def swa_split(g: Geometry, attn_tp: int, dtype_bytes: int, ratio: float,
              draft_swa_layers: int = 0) -> SwaSplit:
    per_layer = per_layer_cell(g, attn_tp, dtype_bytes)
    layers = swa_layers(g) + draft_swa_layers
    return SwaSplit(ratio, per_layer * layers, (
        f"{per_layer} B per sliding layer · {layers} sliding layers, counted at "
        f"--swa-full-tokens-ratio {ratio}; pool_configurator.py::HybridSWAPoolConfigurator"))



@dataclass(frozen=True)
class PoolCells:
    """What the engine's pool configurator charges per token, before any byte is counted."""

    cell_target: int
    target_rule: str
    target_layers: int
    cell_draft: int
    draft_rule: str | None
    swa: SwaSplit | None
    baseline_swa: SwaSplit | None
    fallback_draft: int | None
    note: str | None


def pool_cells(pair: EngineInput, defaults: Defaults = DEFAULTS) -> PoolCells:
    """The configurator the engine picks for this pair (DefaultPoolConfigurator or
    HybridSWAPoolConfigurator) and its bytes per token: target, draft, sliding layers."""
    dep = pair.runbook.deployment
    spec = pair.runbook.speculation
    tp, pp = dep.parallel.tensor, dep.parallel.pipeline
    attn_tp = tp  # attention DP is not used by specpair runbooks
    target, draft = pair.target.geometry, pair.draft.geometry if pair.draft else None
    t_bytes_kv = kv_bytes(dep.kv_cache_dtype, target)
    hybrid = uses_hybrid_swa_pools(target, dep.hybrid_kv_pools, defaults.engine)
    if hybrid and pp > 1:
        raise SpecpairError.single(
            "runbook", f"hybrid-SWA pools under pipeline parallelism are not modelled for "
            f"{defaults.engine}", "set deployment.parallel.pipeline to 1, or "
            "deployment.hybrid_kv_pools: false (--disable-hybrid-swa-memory)",
            field_path="deployment.parallel.pipeline")
    cell_t, cell_t_rule = target_cell(target, attn_tp, pp, t_bytes_kv, hybrid)
    ratio = defaults.swa_full_tokens_ratio.resolved
    swa = swa_split(target, attn_tp, t_bytes_kv, ratio) if hybrid else None
    baseline_swa = swa
    layers_t = math.ceil((target.full_attention_layers if hybrid else kv_layers(target)) / pp)
    note = None
    fb_cell: int | None = None
    if spec.method is Method.NGRAM or draft is None:
        return PoolCells(cell_t, cell_t_rule, layers_t, 0, None, swa, baseline_swa, None, None)
    draft_kv: KVDtype | None = dep.draft_kv_cache_dtype or dep.kv_cache_dtype
    d_bytes = kv_bytes(draft_kv, draft)
    exact, exact_rule = exact_draft_cell(draft, attn_tp, d_bytes)
    if spec.method.is_block_drafter and hybrid:
        # HybridSWAPoolConfigurator adds the resolved draft cell, or nothing at all
        cell_d = exact
        rule = (f"{spec.method.value}: the draft's own geometry, {exact_rule}; "
                "HybridSWAPoolConfigurator adds it to the full-pool cell (0 if the "
                "engine cannot resolve the draft)")
        note = ("If the engine cannot resolve the draft config, the hybrid-SWA "
                "configurator reserves nothing for the draft pool.")
    elif hybrid:
        # EAGLE family: draft layers at the TARGET's per-layer full (or SWA) cell
        d_layers = eagle_draft_layers(draft)
        d_swa = swa_layers(draft) if uses_hybrid_swa_pools(draft, True, defaults.engine) else 0
        per_layer = per_layer_cell(target, attn_tp, t_bytes_kv)
        cell_d = per_layer * (d_layers - d_swa)
        swa = swa_split(target, attn_tp, t_bytes_kv, ratio, d_swa)
        rule = (f"{spec.method.value}: {d_layers - d_swa} draft layers at the target's "
                f"full-layer cell {per_layer} B; HybridSWAPoolConfigurator")
    elif spec.method.is_block_drafter:
        cell_d = exact
        rule = (f"{spec.method.value}: the draft's own geometry, {exact_rule}; draft KV "
                f"dtype {(draft_kv or KVDtype.AUTO).value}; "
                "draft_kv_budget.resolve_dflash_draft_cell_size")
        fb_cell = math.ceil(cell_t * (layers_t + kv_layers(draft)) / layers_t) - cell_t
        if fb_cell < exact:
            note = (f"If the engine cannot resolve the draft ('falling back to layer-count "
                    f"scaling' in its log) it budgets {fb_cell} B/token for a draft that "
                    f"allocates {exact}: the pool is under-reserved by "
                    f"{exact - fb_cell} B per token, taken from the slack.")
    else:
        d_layers = eagle_draft_layers(draft)
        cell_d = int(cell_t * d_layers / layers_t)
        rule = (f"{spec.method.value}: layer scaling of the target cell, "
                f"int(cell_t · {d_layers} / {layers_t}); "
                "pool_configurator.py (EAGLE family)")
        note = _scaled_draft_note(exact, exact_rule, cell_d, draft_kv, dep.kv_cache_dtype)
    return PoolCells(cell_t, cell_t_rule, layers_t, cell_d, rule, swa, baseline_swa, fb_cell,
                     note)


def _scaled_draft_note(exact: int, exact_rule: str, cell_d: int, draft_kv: KVDtype | None,
                       target_kv: KVDtype) -> str | None:
    """An EAGLE-family draft pool: what the draft runner allocates (its own geometry, at
    --speculative-draft-kv-cache-dtype: the worker copies it into the draft's
    kv_cache_dtype) against what the budget reserves (the target cell, layer-scaled, at
    the target's dtype). Only more than the reservation comes out of the slack; less is
    reserved for nothing, and the token capacity does not move with the draft's dtype."""
    if exact == cell_d:
        return None
    allocates = (f"The draft runner allocates its own geometry ({exact_rule} = {exact} "
                 f"B/token) but the budget scales the target cell ({cell_d} B/token): ")
    if exact > cell_d:
        return (allocates + f"the difference of {exact - cell_d} B per token comes out of "
                "the slack [inferred from the 0.5.23 pool code].")
    own = draft_kv is not None and draft_kv is not target_kv
    return (allocates + f"{cell_d - exact} B per token are reserved for the draft and stay "
            "unused [inferred from the 0.5.23 pool code]."
            + (f" The draft KV dtype ({draft_kv.value}) shrinks what the draft runner "
               "allocates, not the reservation: the token capacity stays that of the "
               f"target's dtype ({target_kv.value})." if own and draft_kv else ""))
