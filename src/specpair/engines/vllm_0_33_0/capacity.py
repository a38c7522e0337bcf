"""vLLM 0.33.0: what a KV budget in bytes holds in a block plan (`block_pool.BlockPlan`):
blocks, the blocks one full-context request takes, the token capacity and the running
requests, as the engine reports them at start-up (`v1/core/kv_cache_utils.py`:
'GPU KV cache size', 'Maximum concurrency').
"""

from __future__ import annotations

from specpair.engines.vllm_0_33_0.block_pool import BlockPlan
from specpair.model.budget import Line, Scenario, line

# Async scheduling keeps two batches in flight (VllmConfig.max_concurrent_batches, PP 1)
IN_FLIGHT_BATCHES = 2


def scenario(name: str, available: int, plan: BlockPlan, block: int, context: int,
             max_seqs: int, in_flight: int, cell_t_block: int, cell_d_block: int,
             lines: list[Line]) -> Scenario:
    """The scenario of `available` KV bytes in `plan`, its capacity lines after `lines`."""
    bytes_per_block = plan.bytes_per_block
    blocks = available // bytes_per_block if available > 0 else 0
    per_request = plan.blocks_per_request(context, block, in_flight)
    concurrency = blocks / per_request
    tokens = int(concurrency * context)
    sequences = blocks // per_request
    sliding = any(kind == "sliding" for kind, _, _, _ in plan.groups)
    chunked = any(kind == "chunked" for kind, _, _, _ in plan.groups)
    lines = [*lines,
             line(key="bytes_per_block", label="bytes per block", value=bytes_per_block,
                  unit="B", rule=f"{plan.rule}; kv_cache_planning.py"),
             line(key="num_blocks", label="KV blocks", value=blocks, unit="blocks",
                  rule="available KV bytes // bytes per block"),
             line(key="blocks_per_request", label="blocks one full-context request takes",
                  value=per_request, unit="blocks",
                  rule=f"Σ over {len(plan.groups)} groups: full cdiv({context}, {block})"
                       + (f"; state {plan.state_blocks} blocks (MambaSpec, mode align)"
                          if plan.state_blocks else "")
                       + (f"; sliding cdiv(min(window − 1 + {in_flight} in-flight tokens, "
                          f"{context}), {block}) + 1 (in flight: {IN_FLIGHT_BATCHES} batches "
                          "of max_num_batched_tokens, async scheduling)" if sliding else "")
                       + (f"; chunked cdiv(min(attention chunk + {in_flight} in-flight "
                          f"tokens, {context}), {block})" if chunked else "")),
             line(key="max_total_tokens", label="token capacity ('GPU KV cache size')",
                  value=tokens, unit="tokens",
                  rule=f"int(blocks / {per_request} · {context}); "
                       "kv_cache_utils.py::get_kv_cache_capacity"),
             line(key="max_concurrency", label="full-context requests ('Maximum concurrency')",
                  value=sequences, unit="requests", rule=f"blocks // {per_request}")]
    fits = available > 0 and sequences >= 1
    verdict = (f"fits: {sequences} full-context sequences" if fits else
               "does not fit: the weights and the engine's own memory take all that "
               "gpu_memory_utilization grants, nothing is left for the KV cache; raise "
               "deployment.memory_fraction if the weights fit the GPU, else use more "
               "tensor-parallel ranks or a larger GPU" if available <= 0 else
               "does not fit: one request at the context length needs more KV than is left "
               "('To serve at least one request with the model's max seq len …')")
    if len(plan.groups) > 1 and cell_t_block + cell_d_block:
        # the groups alias one block pool: a block costs the largest group's bytes, shared
        # between target and draft in proportion to their layers' pages
        whole = cell_t_block + cell_d_block
        cell_t_block = bytes_per_block * cell_t_block // whole
        cell_d_block = bytes_per_block - cell_t_block
    cell_t, cell_d = cell_t_block // block, cell_d_block // block
    requests, headroom = seats(max_seqs, tokens, blocks, per_request, bytes_per_block)
    return Scenario(
        name=name, cell_target=cell_t, cell_draft=cell_d, kv_budget_bytes=max(available, 0),
        max_total_tokens=tokens, max_running_requests=requests, sequences_at_context=sequences,
        target_kv_bytes=blocks * cell_t_block, draft_kv_bytes=blocks * cell_d_block,
        full_context_headroom_bytes=headroom, fits=fits, verdict=verdict, lines=lines)


def seats(max_seqs: int, tokens: int, blocks: int, per_request: int, bytes_per_block: int
          ) -> tuple[int, int]:
    """What max_num_seqs decides: the running requests and the headroom they leave, the
    one part of `scenario` that reads it (`Rules.recap` asks this alone again)."""
    requests = min(max_seqs, tokens)
    return requests, (blocks - requests * per_request) * bytes_per_block


def _line_value(scenario: Scenario, key: str) -> int:
    value = next(x.value for x in scenario.lines if x.key == key)
    assert isinstance(value, int)
    return value


def reseated(computed: Scenario, max_seqs: int) -> Scenario:
    """`computed` as `scenario` makes it with `max_seqs`: its blocks, a request's blocks
    and a block's bytes are its own lines."""
    requests, headroom = seats(max_seqs, computed.max_total_tokens,
                               _line_value(computed, "num_blocks"),
                               _line_value(computed, "blocks_per_request"),
                               _line_value(computed, "bytes_per_block"))
    return computed.model_copy(update={"max_running_requests": requests,
                                       "full_context_headroom_bytes": headroom})
