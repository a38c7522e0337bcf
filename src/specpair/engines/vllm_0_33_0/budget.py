"""vLLM 0.33.0: the shared KV block pool as the engine sizes it, per GPU rank.

vllm 0.33.0 (`vllm/v1/worker/utils.py`, `vllm/v1/worker/gpu_worker.py::
determine_available_memory`): `requested = ceil(total · gpu_memory_utilization)` is the whole
instance's budget; weights (target and draft), non-torch allocations, the profiled
activation peak and the CUDA-graph estimate come out of it, and the rest is KV. Draft
attention layers are registered next to the target's and share the block pool: one block
id addresses `block_size` tokens in every layer, so bytes per block are the sum of every
layer's page. With `--kv-cache-memory-bytes` the KV budget is that number.

Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5) keep a fixed-size state per request in the
same pool: the platform raises the attention block size until one attention page holds a
state page and pads the state page to it (`Platform._align_hybrid_block_size`), and each
state group keeps a fixed number of blocks per request (`MambaSpec`, mode `align`).

The layers' pages and the pool's groups are `block_pool.py`, what a KV budget holds in
them `capacity.py`; `Rules` here holds what a release decides (how the layers group, how
the state aligns) and the budget table.
"""

from __future__ import annotations

import math

from specpair.engines import engine_lists
from specpair.engines.kv_arithmetic import kv_bytes, kv_layers, pct, storage, weights_per_rank
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0 import capacity, schedule
from specpair.engines.vllm_0_33_0.args import server_args
from specpair.engines.vllm_0_33_0.block_pool import (
    ATTENTION_KERNEL_BLOCK,
    GDN_CHECKPOINT_ALIGNMENT,
    BlockPlan,
    LayerSpec,
    StatePlan,
    gdn_state_bytes,
    layer_specs,
    page_bytes,
)
from specpair.engines.vllm_0_33_0.capacity import IN_FLIGHT_BATCHES
from specpair.engines.vllm_0_33_0.facts import PROFILE
from specpair.facts.hardware import GPU
from specpair.model.budget import Assumption, Budget, GiB, Line, assumption, line
from specpair.model.common import KVDtype, Method
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry
from specpair.model.memo import value_memo

ENGINE = PROFILE.label
DEFAULT_NON_TORCH = int(0.6 * GiB)
DEFAULT_ACTIVATION_PEAK = 2 * GiB
DEFAULT_CUDA_GRAPHS = GiB // 2


def _weights(pair: EngineInput) -> tuple[int, int, list[Line]]:
    """(target, draft, their lines): the weights per rank, the draft's over its own TP."""
    par = pair.runbook.deployment.parallel
    tp, pp = par.tensor, par.pipeline
    draft_tp = par.draft_tensor or tp
    wt = weights_per_rank(pair.target_own_weight_bytes,
                          pair.target.weights.replicated_bytes, tp * pp)
    wd = weights_per_rank(pair.draft.weights.weight_bytes, pair.draft.weights.replicated_bytes,
                          draft_tp) if pair.draft else 0
    weights = [
        line(key="target_weights", label="target weights per rank", value=wt, unit="B",
             rule=f"(weight bytes − replicated) / (tp·pp = {tp * pp}) + replicated"),
        line(key="draft_weights", label="draft weights per rank", value=wd, unit="B",
             rule=f"draft sharded over draft_tensor_parallel_size = {draft_tp}"),
    ]
    return wt, wd, weights


def _target_page_line(t_block: int, layers: str, block: int) -> Line:
    """The target's bytes per block over all its layers, at the plan's block size."""
    return line(key="page_target", label="target bytes per block, all its layers",
                value=t_block, unit="B",
                rule=f"Σ over {layers} of the layer's page (block size {block})")


class Rules:
    """vLLM 0.33.0's KV budget. Another release of vLLM whose reviewed facts
    (`facts.DIFFERENCES` of its package) differ here subclasses it and overrides the method
    of each difference, nothing else (vllm_0_32_0/budget.py)."""

    server_args = staticmethod(server_args)
    """The release's resolved server arguments (a later release passes its own defaults)."""
    graph_note = staticmethod(schedule.graph_note)
    gdn_checkpoint_alignment: int | None = GDN_CHECKPOINT_ALIGNMENT
    """Tokens between the GDN layers' prefill checkpoints, which also cost one state block
    per request; None where the release's GDN layer keeps no checkpoint."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        """The release's label, as the budget and its refusals name it."""

    def __eq__(self, other: object) -> bool:
        # by value (`_layers_plan` is memoised with the rules among its arguments): the
        # class holds the release's methods and constants, `engine` its label
        return isinstance(other, Rules) and type(other) is type(self) \
            and other.engine == self.engine

    def __hash__(self) -> int:
        return hash((type(self), self.engine))

    def state_plan(self, g: Geometry, tp: int, block: int, dtype_bytes: int, num_spec: int
                   ) -> StatePlan:
        """`Platform._align_hybrid_block_size` (mode `align`): the block size is the smallest
        multiple of lcm(max(kernel block, block), checkpoint alignment) whose attention page
        holds the state page, then the state page is padded to the attention page."""
        state, shape_rule = gdn_state_bytes(g, tp, num_spec, self.engine)
        per_token, _ = page_bytes(g, tp, 1, dtype_bytes)
        checkpoint = self.gdn_checkpoint_alignment
        align = max(ATTENTION_KERNEL_BLOCK, block)
        if checkpoint is not None:
            align = math.lcm(align, checkpoint)
        aligned = align * math.ceil(state / (align * per_token))
        aligned = ATTENTION_KERNEL_BLOCK * math.ceil(aligned / ATTENTION_KERNEL_BLOCK)
        block = max(block, aligned)
        # MambaSpec.max_memory_usage_bytes (align): 2 states + one per draft token + one
        # prefill checkpoint (the FlashInfer GDN layer exports checkpoints)
        per_request = 2 + num_spec + (0 if checkpoint is None else 1)
        held = f"2 + {num_spec} draft tokens" + (" + 1 prefill checkpoint"
                                                 if checkpoint is not None else "")
        return StatePlan(block, state, per_request,
                         f"GDN state {state} B per layer ({shape_rule}); block size {block} = "
                         f"{align} · cdiv({state}, {align} · {per_token} B per token), state page "
                         f"padded to {block * per_token} B; {per_request} blocks per request "
                         f"({held})")


    def block_plan(self, specs: list[LayerSpec], hybrid_manager: bool,
                   state_blocks: int = 0) -> BlockPlan:
        """How the release groups the layers (target and draft) and sizes one block."""
        if not hybrid_manager and len({(s.kind, s.window) for s in specs}) > 1:
            # unify_hybrid_kv_cache_specs: local layers among others are promoted to full
            # attention; specs all alike (a window on every layer) are kept as they are
            # (_promote_local_kv_cache_specs, v1/core/kv_cache_utils.py in 0.32.0,
            # kv_cache_planning.py from 0.33.0: is_kv_cache_spec_uniform or
            # UniformTypeKVCacheSpecs.is_uniform_type)
            specs = [LayerSpec("full", s.page, None, s.shape) for s in specs]
        kinds = {(s.kind, s.window) for s in specs}
        if len(kinds) == 1:
            kind, window = next(iter(kinds))
            return BlockPlan([(kind, len(specs), sum(s.page for s in specs), window)],
                             sum(s.page for s in specs),
                             "one KV cache group: Σ over target and draft layers of the page")
        if len({s.page for s in specs}) > 1:
            raise SpecpairError.single(
                "runbook", f"not modelled: {self.engine} hybrid KV cache groups whose layers have "
                "different page sizes (block-packed layout)",
                "set deployment.hybrid_kv_pools: false (--disable-hybrid-kv-cache-manager)",
                field_path="deployment.hybrid_kv_pools")
        # _get_kv_cache_groups_uniform_page_size: one bucket per distinct spec, in layer order
        buckets: dict[tuple[str, int | None, tuple[int, int, int, int]], int] = {}
        for s in specs:
            key = (s.kind, s.window, s.shape)
            buckets[key] = buckets.get(key, 0) + 1
        sizes = list(buckets.values())
        group_size = min(sizes)
        if max(sizes) < min(sizes) * 1.5:
            group_size = max(sizes)  # pad the smaller type instead of splitting the larger
        page = specs[0].page
        groups: list[tuple[str, int, int, int | None]] = []
        for (bucket_kind, bucket_window, _), count in buckets.items():
            num_groups = math.ceil(count / group_size)
            for i in range(num_groups):
                groups.append((bucket_kind, len(range(i, count, num_groups)), page, bucket_window))
        widest = max(n for _, n, _, _ in groups)
        return BlockPlan(groups, widest * page,
                         f"hybrid KV cache manager: {len(groups)} groups of at most {group_size} "
                         f"layers share one block pool; bytes per block = the largest group's "
                         f"({widest} layers · {page} B), not the sum", state_blocks)


    def hybrid_state(self, pair: EngineInput, block: int, speculative: bool
                     ) -> StatePlan | None:
        """The GDN state plan of a linear-attention hybrid target, or None for other targets;
        refuses the hybrids and settings it does not model."""
        dep = pair.runbook.deployment
        target = pair.target.geometry
        la = target.linear_attention
        if la is None:
            return None
        if la.kind != "gdn" or target.attention == "mla" or target.sliding_window_layers \
                or target.chunked_attention_layers:
            raise SpecpairError.single(
                "runbook", f"not modelled: the {self.engine} budget for {la.kind} state layers "
                f"next to {target.attention} attention", "budget this pair by measurement or "
                "serve it with SGLang", field_path="target")
        if dep.parallel.pipeline > 1 or not dep.hybrid_kv_pools:
            raise SpecpairError.single(
                "runbook", f"not modelled: linear-attention hybrids on {self.engine} with pipeline "
                "parallelism or without the hybrid KV cache manager",
                "set deployment.parallel.pipeline: 1 and deployment.hybrid_kv_pools: true",
                field_path="deployment")
        if dep.linear_state != type(dep.linear_state)():
            raise SpecpairError.single(
                "runbook", f"not modelled: deployment.linear_state on {self.engine} (its settings "
                "are SGLang's; the vLLM command does not carry them)",
                "remove deployment.linear_state", field_path="deployment.linear_state")
        # the speculative config (n-gram too) widens the conv window and the state blocks
        num_spec = (self.server_args(pair, pair.gpu_spec).num_speculative_tokens or 0) \
            if speculative else 0
        return self.state_plan(target, dep.parallel.tensor, block,
                          kv_bytes(dep.kv_cache_dtype, target), num_spec)


    def kv_plan(self, pair: EngineInput, speculative: bool = True
                ) -> tuple[BlockPlan, int, int, int]:
        """(block plan, block size, target bytes per block, draft bytes per block)."""
        dep = pair.runbook.deployment
        spec = pair.runbook.speculation
        tp = dep.parallel.tensor
        block = self.server_args(pair, pair.gpu_spec).block_size
        state = self.hybrid_state(pair, block, speculative)
        draft = pair.draft.geometry if pair.draft and speculative \
            and spec.method is not Method.NGRAM else None
        return self._layers_plan(pair.target.geometry, draft, tp, dep.parallel.pipeline,
                                 dep.parallel.draft_tensor or tp, block, dep.kv_cache_dtype,
                                 dep.draft_kv_cache_dtype or dep.kv_cache_dtype,
                                 self.hybrid_manager(pair, speculative), state)

    def hybrid_manager(self, pair: EngineInput, speculative: bool) -> bool:
        """Whether the release keeps its hybrid KV cache manager on: the runbook's choice
        (deployment.hybrid_kv_pools; the command then leaves the switch to the engine),
        unless VllmConfig.__post_init__ turns it off itself: for a model with chunked
        local attention when the speculative method drafts from the target's hidden
        states (vllm.py:2235-2245 in 0.33.0; which methods do is read from the release,
        engine_lists `hybrid_manager_off_for_chunked`)."""
        if not pair.runbook.deployment.hybrid_kv_pools:
            return False
        if not speculative or not pair.target.geometry.chunked_attention_layers:
            return True
        method = PROFILE.method_names.get(pair.runbook.speculation.method)
        return method not in engine_lists.of(self.engine).hybrid_manager_off_for_chunked

    @value_memo  # of the models, their parallelism and dtypes alone: one per deployment of
    # a plan, not one per candidate (the memory fraction, the SLO and the concurrency
    # leave it unchanged)
    def _layers_plan(self, target: Geometry, draft: Geometry | None, tp: int, pp: int,
                     draft_tp: int, block: int, kv: KVDtype, d_kv: KVDtype,
                     hybrid_kv_pools: bool, state: StatePlan | None
                     ) -> tuple[BlockPlan, int, int, int]:
        """`kv_plan` once the server arguments are read: the target's layers (and the
        draft's, None without a draft in the pool) in the block pool."""
        state_spec: LayerSpec | None = None
        if state is not None and target.linear_attention is not None:
            block = state.block
            per_token, _ = page_bytes(target, tp, 1, kv_bytes(kv, target))
            state_spec = LayerSpec("state", block * per_token, None, (0, 0, 0, 0))
        # in layer order (the order of the groups follows the first layer of each kind)
        attention = iter(layer_specs(target, tp, block, kv_bytes(kv, target)))
        t_specs = [state_spec if layer.kind == "linear" and state_spec is not None
                   else next(attention) for layer in target.layer_list()
                   if layer.kind != "linear" or state_spec is not None]
        if pp > 1:
            if target.sliding_window_layers or target.chunked_attention_layers:
                raise SpecpairError.single(
                    "runbook", f"not modelled: sliding-window or chunked layers under pipeline "
                    f"parallelism "
                    f"on {self.engine}", "set deployment.parallel.pipeline to 1",
                    field_path="deployment.parallel.pipeline")
            t_specs = t_specs[:math.ceil(len(t_specs) / pp)]
        d_specs: list[LayerSpec] = []
        if draft is not None and target.sliding_window_layers and not (
                target.full_attention_layers or target.chunked_attention_layers
                or target.linear_attention is not None):
            # EngineArgs.create_engine_config sets CacheConfig.sliding_window for a target
            # whose layers all slide, and the draft's Attention layers, built with the same
            # cache config and no window of their own, take it (attention.py)
            raise SpecpairError.single(
                "runbook", f"not modelled: a draft beside a target whose every layer slides "
                f"on {self.engine} (the draft's layers take the target's window, "
                "CacheConfig.sliding_window)", "serve the target without a draft model "
                "(NGRAM), or confirm the figures with `specpair verify`",
                field_path="speculation.method")
        if draft is not None:
            # `auto` is resolved against vllm_config.model_config, the TARGET's: a draft
            # checkpoint saved in float32 still keeps its KV in the target's dtype
            d_specs = layer_specs(draft, draft_tp, block, kv_bytes(d_kv, target))
        plan = self.block_plan(t_specs + d_specs, hybrid_kv_pools,
                          state.blocks_per_request if state is not None else 0)
        if state is not None:
            plan = BlockPlan(plan.groups, plan.bytes_per_block, f"{plan.rule}; {state.rule}",
                             plan.state_blocks)
        return plan, block, sum(s.page for s in t_specs), sum(s.page for s in d_specs)


    def _assumptions(self, pair: EngineInput) -> tuple[list[Assumption], int, int, int]:
        """(their lines, non-torch, activation peak, CUDA graphs): the engine's own memory
        that the budget assumes, as the runbook declares it or by default."""
        a = pair.runbook.deployment.assumptions
        non_torch = a.other_allocations_bytes if a.other_allocations_bytes is not None \
            else DEFAULT_NON_TORCH
        activation = a.activation_peak_bytes if a.activation_peak_bytes is not None \
            else DEFAULT_ACTIVATION_PEAK
        graphs = a.cuda_graph_bytes if a.cuda_graph_bytes is not None else DEFAULT_CUDA_GRAPHS

        def source(value: object, default: str) -> str:
            return "declared in runbook" if value is not None else default

        assumptions = [
            assumption(key="non_torch", label="non-torch allocations (NCCL, CUDA context)",
                       value=non_torch, unit="B",
                       source=source(a.other_allocations_bytes, "default 0.6 GiB")),
            assumption(key="activation_peak", label="activation peak of the profile run",
                       value=activation, unit="B",
                       source=source(a.activation_peak_bytes, "default 2 GiB; read the engine's "
                                     "'Available KV cache memory' log to calibrate")),
            assumption(key="cuda_graphs", label="CUDA-graph memory estimate", value=graphs,
                       unit="B", source=source(a.cuda_graph_bytes, "default 0.5 GiB")
                       + self.graph_note(pair)),
        ]
        return assumptions, non_torch, activation, graphs

    def budget(self, pair: EngineInput, gpu: GPU) -> Budget:
        """The target alone and with the draft: the KV bytes left after weights and the
        engine's own memory (or pinned by --kv-cache-memory-bytes), in the block pool."""
        rb = pair.runbook
        dep = rb.deployment
        spec = rb.speculation
        target = pair.target.geometry
        draft = pair.draft.geometry if pair.draft else None
        args = self.server_args(pair, gpu)
        util = args.gpu_memory_utilization
        assumptions, non_torch, activation, graphs = self._assumptions(pair)
        wt, wd, weights = _weights(pair)
        requested = math.ceil(gpu.memory_bytes * util)
        max_seqs = args.max_num_seqs
        in_flight = IN_FLIGHT_BATCHES * args.max_num_batched_tokens

        def available(draft_weights: int) -> tuple[int, list[Line]]:
            if dep.kv_cache_memory_bytes is not None:
                return dep.kv_cache_memory_bytes, [line(
                    key="kv_available", label="KV budget (--kv-cache-memory-bytes)",
                    value=dep.kv_cache_memory_bytes, unit="B",
                    rule="fixed by the flag; gpu_memory_utilization is ignored")]
            value = requested - wt - draft_weights - non_torch - activation - graphs
            return value, [
                line(key="requested", label="requested = ceil(total · gpu_memory_utilization)",
                     value=requested, unit="B", rule=f"ceil({gpu.memory_bytes} · {util}); "
                                                     "v1/worker/utils.py"),
                line(key="kv_available", label="available KV memory", value=value, unit="B",
                     rule="requested − weights (target + draft) − non-torch − activation peak − "
                          "CUDA graphs; gpu_worker.py::determine_available_memory"
                          + ("; negative: the weights and the engine's own memory exceed what "
                             "gpu_memory_utilization grants, nothing is left for the KV cache"
                             if value <= 0 else ""))]

        base_plan, block, t_block, _ = self.kv_plan(pair, speculative=False)
        base_avail, base_lines = available(0)
        layers = f"{kv_layers(target)} target layers" + (
            f" and {target.linear_attention.layers} state layers (padded to the page)"
            if target.linear_attention is not None else "")
        t_line = _target_page_line(t_block, layers, block)
        baseline = capacity.scenario("target alone", base_avail, base_plan, block,
                                     dep.context_length, max_seqs, in_flight, t_block, 0,
                                     [*base_lines, t_line])
        spec_avail, spec_lines = available(wd)
        # a hybrid's block size depends on the draft tokens (the state's conv window grows)
        plan, spec_block, spec_t_block, d_block = self.kv_plan(pair)
        spec_t_line = t_line if spec_block == block \
            else _target_page_line(spec_t_block, layers, spec_block)
        d_lines: list[Line] = []
        if d_block and draft is not None:
            d_lines = [line(key="page_draft", label="draft bytes per block, all its layers",
                            value=d_block, unit="B",
                            rule=f"{kv_layers(draft)} draft layers in the same block pool")]
        scenario = capacity.scenario(f"with the {spec.method.value} draft", spec_avail, plan,
                                     spec_block, dep.context_length, max_seqs, in_flight,
                                     spec_t_block, d_block, [*spec_lines, spec_t_line, *d_lines])
        return Budget(
            engine=self.engine, gpu=gpu.key, assumptions=assumptions, weights=weights,
            baseline=baseline, speculative=scenario,
            capacity_lost_pct=pct(baseline.max_total_tokens - scenario.max_total_tokens,
                                  baseline.max_total_tokens),
            draft_share_of_kv_pct=pct(scenario.cell_draft, scenario.cell_total),
            storage=storage(pair))

    def recap(self, computed: Budget, pair: EngineInput, gpu: GPU) -> Budget:
        """`budget(pair, gpu)`, from `computed`, the budget of a pair that differs from
        `pair` in deployment.max_running_requests (and deployment.concurrency, which the
        budget does not read) alone: the runbook's max_running_requests is read by
        `server_args`'s max_num_seqs only (max_num_batched_tokens is the GPU's default),
        and max_num_seqs by `capacity.seats` only, so that is all that is computed again."""
        max_seqs = self.server_args(pair, gpu).max_num_seqs
        assert computed.fallback is None  # this release budgets no fallback pool
        speculative = computed.speculative
        return computed.model_copy(update={
            "baseline": capacity.reseated(computed.baseline, max_seqs),
            "speculative": None if speculative is None
            else capacity.reseated(speculative, max_seqs)})

    def reschedule(self, computed: Budget, pair: EngineInput, gpu: GPU) -> Budget | None:
        """`budget(pair, gpu)` from `computed`, the same pair's budget before its schedule
        was resolved: the schedule reaches this budget only through the CUDA-graph note of
        the assumptions (`graph_note`: the capture tiers it adds; the server arguments and
        the memory charged do not read it), so the assumptions are all that is computed
        again, and a schedule that moved one of their figures makes this None."""
        assumptions = self._assumptions(pair)[0]
        if [a.value for a in assumptions] != [a.value for a in computed.assumptions]:
            return None
        return computed.model_copy(update={"assumptions": assumptions})


RULES = Rules(ENGINE)
recap = RULES.recap
reschedule = RULES.reschedule
state_plan = RULES.state_plan
block_plan = RULES.block_plan
kv_plan = RULES.kv_plan
budget = RULES.budget
