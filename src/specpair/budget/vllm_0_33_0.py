"""vLLM 0.33.0: the shared KV block pool as the engine sizes it, per GPU rank.

ENGINE_NOTES_VLLM.md §4: `requested = ceil(total · gpu_memory_utilization)` is the whole
instance's budget; weights (target and draft), non-torch allocations, the profiled
activation peak and the CUDA-graph estimate come out of it, and the rest is KV. Draft
attention layers are registered next to the target's and share the block pool: one block
id addresses `block_size` tokens in every layer, so bytes per block are the sum of every
layer's page. With `--kv-cache-memory-bytes` the KV budget is that number.
"""

from __future__ import annotations

import math

from specpair.budget.common import (
    kv_bytes,
    kv_heads_per_rank,
    kv_layers,
    pct,
    storage,
    weights_per_rank,
)
from specpair.budget.model import Assumption, Budget, GiB, Line, Scenario
from specpair.errors import SpecpairError
from specpair.geometry import Geometry
from specpair.hardware import GPU
from specpair.resolve import ResolvedPair
from specpair.schema.common import KVDtype, Method

ENGINE = "vllm 0.33.0"
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_BLOCK_SIZE = 16
DEFAULT_NON_TORCH = int(0.6 * GiB)
DEFAULT_ACTIVATION_PEAK = 2 * GiB
DEFAULT_CUDA_GRAPHS = GiB // 2


def page_bytes(g: Geometry, tp: int, block: int, dtype_bytes: int) -> tuple[int, str]:
    """`kv_cache_interface` page size of one layer for one block."""
    if g.attention == "mla":
        page = block * g.mla_latent_dim * dtype_bytes
        return page, f"MLA: {block} · {g.mla_latent_dim} · {dtype_bytes} B (not split by TP)"
    heads = kv_heads_per_rank(g.num_key_value_heads, tp)
    page = heads * block * (g.head_dim + g.v_head_dim) * dtype_bytes
    return page, (f"{heads} KV heads · {block} tokens · ({g.head_dim} + {g.v_head_dim}) · "
                  f"{dtype_bytes} B")


def default_max_num_seqs(gpu: GPU) -> int:
    mem_gib = gpu.memory_bytes / GiB
    if mem_gib >= 160 or (mem_gib >= 70 and not gpu.key.startswith("A100")):
        return 1024
    return 256


def _scenario(name: str, available: int, bytes_per_block: int, block: int, context: int,
              max_seqs: int, cell_t_block: int, cell_d_block: int, lines: list[Line]
              ) -> Scenario:
    blocks = available // bytes_per_block if available > 0 else 0
    tokens = blocks * block
    per_request = math.ceil(context / block)
    sequences = blocks // per_request
    lines = [*lines,
             Line(key="bytes_per_block", label="bytes per block (all layers)",
                  value=bytes_per_block, unit="B",
                  rule="Σ over target and draft layers of the layer's page; "
                       "kv_cache_planning.py"),
             Line(key="num_blocks", label="KV blocks", value=blocks, unit="blocks",
                  rule="available KV bytes // bytes per block"),
             Line(key="max_total_tokens", label="token capacity ('GPU KV cache size')",
                  value=tokens, unit="tokens", rule=f"blocks · block size {block}"),
             Line(key="max_concurrency", label="full-context requests ('Maximum concurrency')",
                  value=sequences, unit="requests",
                  rule=f"blocks // ceil({context} / {block})")]
    fits = available > 0 and sequences >= 1
    verdict = (f"fits: {sequences} full-context sequences" if fits else
               "does not fit: one request at the context length needs more KV than is left "
               "('To serve at least one request with the model's max seq len …')")
    cell_t, cell_d = cell_t_block // block, cell_d_block // block
    requests = min(max_seqs, tokens)
    return Scenario(
        name=name, cell_target=cell_t, cell_draft=cell_d, kv_budget_bytes=max(available, 0),
        max_total_tokens=tokens, max_running_requests=requests, sequences_at_context=sequences,
        target_kv_bytes=blocks * cell_t_block, draft_kv_bytes=blocks * cell_d_block,
        full_context_headroom_bytes=(blocks - requests * per_request) * bytes_per_block,
        fits=fits, verdict=verdict, lines=lines)


def budget(pair: ResolvedPair, gpu: GPU) -> Budget:
    rb = pair.runbook
    dep = rb.deployment
    spec = rb.speculation
    target = pair.target.geometry
    draft = pair.draft.geometry if pair.draft else None
    if target.linear_attention is not None:
        raise SpecpairError.single(
            "runbook", f"the {ENGINE} budget for linear-attention hybrids is not modelled",
            "budget this pair by measurement or serve it with SGLang", field_path="target")
    tp, pp = dep.parallel.tensor, dep.parallel.pipeline
    draft_tp = dep.parallel.draft_tensor or tp
    util = dep.memory_fraction or DEFAULT_GPU_MEMORY_UTILIZATION
    block = dep.page_size or DEFAULT_BLOCK_SIZE
    a = dep.assumptions
    non_torch = a.other_allocations_bytes if a.other_allocations_bytes is not None \
        else DEFAULT_NON_TORCH
    activation = a.activation_peak_bytes if a.activation_peak_bytes is not None \
        else DEFAULT_ACTIVATION_PEAK
    graphs = a.cuda_graph_bytes if a.cuda_graph_bytes is not None else DEFAULT_CUDA_GRAPHS

    def source(value: object, default: str) -> str:
        return "declared in runbook" if value is not None else default

    assumptions = [
        Assumption(key="non_torch", label="non-torch allocations (NCCL, CUDA context)",
                   value=non_torch, unit="B",
                   source=source(a.other_allocations_bytes, "default 0.6 GiB")),
        Assumption(key="activation_peak", label="activation peak of the profile run",
                   value=activation, unit="B",
                   source=source(a.activation_peak_bytes, "default 2 GiB; read the engine's "
                                 "'Available KV cache memory' log to calibrate")),
        Assumption(key="cuda_graphs", label="CUDA-graph memory estimate", value=graphs,
                   unit="B", source=source(a.cuda_graph_bytes, "default 0.5 GiB")),
    ]
    wt = weights_per_rank(pair.target_own_weight_bytes,
                          pair.target.weights.replicated_bytes, tp * pp)
    uses_draft_kv = spec.method is not Method.NGRAM and pair.draft is not None
    wd = weights_per_rank(pair.draft.weights.weight_bytes, pair.draft.weights.replicated_bytes,
                          draft_tp) if pair.draft else 0
    weights = [
        Line(key="target_weights", label="target weights per rank", value=wt, unit="B",
             rule=f"(weight bytes − replicated) / (tp·pp = {tp * pp}) + replicated"),
        Line(key="draft_weights", label="draft weights per rank", value=wd, unit="B",
             rule=f"draft sharded over draft_tensor_parallel_size = {draft_tp}"),
    ]
    requested = math.ceil(gpu.memory_bytes * util)
    t_kv = kv_bytes(dep.kv_cache_dtype, target)
    page_t, page_t_rule = page_bytes(target, tp, block, t_kv)
    layers_t = math.ceil(kv_layers(target) / pp)
    max_seqs = dep.max_running_requests or default_max_num_seqs(gpu)

    def available(draft_weights: int) -> tuple[int, list[Line]]:
        if dep.kv_cache_memory_bytes is not None:
            return dep.kv_cache_memory_bytes, [Line(
                key="kv_available", label="KV budget (--kv-cache-memory-bytes)",
                value=dep.kv_cache_memory_bytes, unit="B",
                rule="fixed by the flag; gpu_memory_utilization is ignored")]
        value = requested - wt - draft_weights - non_torch - activation - graphs
        return value, [
            Line(key="requested", label="requested = ceil(total · gpu_memory_utilization)",
                 value=requested, unit="B", rule=f"ceil({gpu.memory_bytes} · {util}); "
                                                 "v1/worker/utils.py"),
            Line(key="kv_available", label="available KV memory", value=value, unit="B",
                 rule="requested − weights (target + draft) − non-torch − activation peak − "
                      "CUDA graphs; gpu_worker.py::determine_available_memory")]

    base_avail, base_lines = available(0)
    t_line = Line(key="page_target", label="target page per layer per block", value=page_t,
                  unit="B", rule=f"{page_t_rule}; {layers_t} layers")
    baseline = _scenario("target alone", base_avail, page_t * layers_t, block,
                         dep.context_length, max_seqs, page_t * layers_t, 0,
                         [*base_lines, t_line])
    spec_avail, spec_lines = available(wd)
    cell_d_block = 0
    d_lines: list[Line] = []
    if uses_draft_kv and draft is not None:
        d_kv: KVDtype | None = dep.draft_kv_cache_dtype or dep.kv_cache_dtype
        # `auto` is the draft's model dtype, and the engine builds the draft's ModelConfig
        # with dtype=target_model_config.dtype (config/speculative.py): the target's dtype,
        # whatever the draft's config.json says
        page_d, page_d_rule = page_bytes(draft, draft_tp, block, kv_bytes(d_kv, target))
        cell_d_block = page_d * kv_layers(draft)
        d_lines = [Line(key="page_draft", label="draft page per layer per block", value=page_d,
                        unit="B", rule=f"{page_d_rule}; {kv_layers(draft)} draft layers in the "
                                       "same block pool; auto KV dtype = the target's dtype")]
    scenario = _scenario(f"with the {spec.method.value} draft", spec_avail,
                         page_t * layers_t + cell_d_block, block, dep.context_length, max_seqs,
                         page_t * layers_t, cell_d_block, [*spec_lines, t_line, *d_lines])
    return Budget(
        engine=ENGINE, gpu=gpu.key, assumptions=assumptions, weights=weights,
        baseline=baseline, speculative=scenario,
        capacity_lost_pct=pct(baseline.max_total_tokens - scenario.max_total_tokens,
                              baseline.max_total_tokens),
        draft_share_of_kv_pct=pct(scenario.cell_draft, scenario.cell_total),
        storage=storage(pair))
