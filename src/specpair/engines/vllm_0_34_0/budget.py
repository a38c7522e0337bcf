"""vLLM 0.34.0's KV budget in its two sizing modes (`deployment.kv_cache_sizing`).

The block pool is 0.33.0's (`vllm_0_33_0/budget.py`, `block_pool.py`, `capacity.py`:
groups, pages, the GDN alignment and the capacity lines are the same code in both wheels,
v1/core/kv_cache_planning.py; the KV oracle checks it against 0.34.0's own planner) with
0.34.0's block size (64) and server arguments. What differs is where the KV bytes come
from (facts.DIFFERENCES "KV cache sizing"):

- *pinned*: specpair passes `--kv-cache-memory-bytes` with the bytes it budgets, which
  turns the extensible cache off (config/vllm.py:3203); the engine allocates exactly
  those bytes, so the capacity is the engine's by construction. The bytes are 0.33.0's
  closed form at gpu_memory_utilization 0.92 (the engine's default with the extensible
  cache off, config/cache.py:495-501); the memory that is not KV (weights, activations,
  graphs, non-torch) is then a safety check against the GPU, from labelled assumptions.
- *measured*: the engine's default. It sizes the cache after warmup and graph capture
  from free memory it measures (`measure_kv_cache_bytes`, v1/worker/extensible_kv_cache.py:
  592-618); the budget follows that formula with the measured terms as labelled
  assumptions and gives the capacity as an estimate with an interval, never as exact.
"""

from __future__ import annotations

import math

from specpair.engines.kv_arithmetic import weights_per_rank
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0 import budget as v0_33_0
from specpair.engines.vllm_0_33_0.capacity import IN_FLIGHT_BATCHES, reseated
from specpair.engines.vllm_0_34_0 import schedule
from specpair.engines.vllm_0_34_0.args import server_args
from specpair.engines.vllm_0_34_0.facts import PROFILE
from specpair.facts.hardware import GPU
from specpair.model.budget import Budget, Line, Scenario, line

__all__ = [
    "ENGINE",
    "INTERVAL",
    "IN_FLIGHT_BATCHES",
    "RULES",
    "Rules",
    "block_plan",
    "budget",
    "kv_plan",
    "pinned_kv_bytes",
    "state_plan",
]

ENGINE = PROFILE.label
# extensible_kv_cache.py:64-71 (CUDA): the margin kept below the measured headroom
MARGIN_FLOOR = 1 << 30  # KV_CACHE_MARGIN_FLOOR_BYTES
MARGIN_FRACTION = 0.75  # KV_CACHE_MARGIN_FRACTION
ESTIMATED_LINES = ("num_blocks", "max_total_tokens", "max_concurrency")
"""The lines that follow from the measured KV bytes, labelled as estimates."""
INTERVAL = (0.5, 1.5)
"""specpair's interval for the measured mode: each measured term (non-torch memory,
activation peak, CUDA graphs) from half to one and a half times its assumed value."""


def _with(scenario: Scenario, replace: dict[str, list[Line]], **update: object) -> Scenario:
    """`scenario` with each line whose key is in `replace` replaced by those lines."""
    lines: list[Line] = []
    for old in scenario.lines:
        lines += replace.get(old.key, [old])
    return scenario.model_copy(update={"lines": lines, **update})


def _value(scenario: Scenario, key: str) -> int:
    found = next(x.value for x in scenario.lines if x.key == key)
    assert isinstance(found, int)
    return found


class Rules(v0_33_0.Rules):
    server_args = staticmethod(server_args)
    graph_note = staticmethod(schedule.graph_note)

    def budget(self, pair: EngineInput, gpu: GPU) -> Budget:
        args = self.server_args(pair, gpu)
        computed = super().budget(pair, gpu)
        if args.kv_cache_sizing == "measured":
            computed = self._measured(pair, gpu, computed)
        else:
            computed = self._pinned(pair, gpu, computed)
        spec = computed.speculative
        if spec is not None and args.max_num_active_seqs is not None:
            spec = reseated(spec, args.running_requests)
            spec = spec.model_copy(update={"lines": [*spec.lines, line(
                key="active_seqs_cap", label="running requests cap of the draft pass",
                value=args.max_num_active_seqs, unit="requests",
                rule=f"max_num_batched_tokens {args.max_num_batched_tokens} // the draft "
                     "pass's queries per request (DFlash K + 1, DSpark K when it samples "
                     "from the anchor); config/vllm.py:2300-2319 overrides "
                     "max_num_active_seqs")]})
            computed = computed.model_copy(update={"speculative": spec})
        return computed

    def recap(self, computed: Budget, pair: EngineInput, gpu: GPU) -> Budget:
        """0.33.0's recap with the drafter's cap on running requests."""
        args = self.server_args(pair, gpu)
        speculative = computed.speculative
        return computed.model_copy(update={
            "baseline": reseated(computed.baseline, args.max_num_seqs),
            "speculative": None if speculative is None
            else reseated(speculative, args.running_requests)})

    def _non_kv(self, budget: Budget, draft: bool) -> tuple[int, str]:
        """Weights and the assumed engine memory that is not KV, per rank."""
        weights = {w.key: int(w.value) for w in budget.weights}
        assumed = {a.key: int(a.value) for a in budget.assumptions}
        total = weights["target_weights"] + (weights["draft_weights"] if draft else 0) \
            + assumed["non_torch"] + assumed["activation_peak"] + assumed["cuda_graphs"]
        return total, ("target weights" + (" + draft weights" if draft else "")
                       + " + non-torch + activation peak + CUDA graphs (assumptions above)")

    def _pinned(self, pair: EngineInput, gpu: GPU, computed: Budget) -> Budget:
        explicit = pair.runbook.deployment.kv_cache_memory_bytes is not None

        def pin(scenario: Scenario | None, draft: bool) -> Scenario | None:
            if scenario is None:
                return None
            kv = _value(scenario, "kv_available")
            non_kv, what = self._non_kv(computed, draft)
            left = gpu.memory_bytes - non_kv - max(kv, 0)
            pinned = line(
                key="kv_available", label="KV budget, pinned (--kv-cache-memory-bytes)",
                value=kv, unit="B",
                rule=("declared in deployment.kv_cache_memory_bytes" if explicit else
                      "computed by specpair: requested − weights − non-torch − activation "
                      "peak − CUDA graphs")
                + "; passed as --kv-cache-memory-bytes, which turns the extensible cache "
                  "off (config/vllm.py:3203): the engine allocates exactly these bytes")
            check = line(
                key="non_kv_check", label="safety check: GPU memory left after the pinned "
                "KV and the assumed non-KV memory", value=left, unit="B",
                rule=f"{gpu.memory_bytes} − ({what}) − pinned KV; assumptions, not the "
                     "engine's: calibrate them from its log ('Available KV cache memory', "
                     "'Graph capturing finished … took N GiB')"
                     + ("; negative: the start would run out of memory" if left < 0 else ""))
            if left >= 0:
                return _with(scenario, {"kv_available": [pinned, check]})
            return _with(scenario, {"kv_available": [pinned, check]}, fits=False,
                         verdict="does not fit: the pinned KV bytes and the assumed non-KV "
                                 "memory exceed the GPU; lower deployment."
                                 "kv_cache_memory_bytes or use kv_cache_sizing: pinned "
                                 "without it")
        baseline = pin(computed.baseline, False)
        assert baseline is not None
        return computed.model_copy(update={
            "baseline": baseline, "speculative": pin(computed.speculative, True)})

    def _measured(self, pair: EngineInput, gpu: GPU, computed: Budget) -> Budget:
        """The engine's `measure_kv_cache_bytes` with the measured terms assumed: the
        estimate, and the capacity's interval over INTERVAL."""
        args = self.server_args(pair, gpu)
        requested = math.ceil(gpu.memory_bytes * args.gpu_memory_utilization)
        assumed = {a.key: int(a.value) for a in computed.assumptions}
        weights = {w.key: int(w.value) for w in computed.weights}
        context = pair.runbook.deployment.context_length

        def estimate(draft: bool, scale: float) -> int:
            peak = int(assumed["activation_peak"] * scale)
            non_kv = weights["target_weights"] + (weights["draft_weights"] if draft else 0) \
                + int((assumed["non_torch"] + assumed["cuda_graphs"]) * scale)
            margin = max(MARGIN_FLOOR, int(peak * MARGIN_FRACTION))
            headroom = gpu.memory_bytes - non_kv
            return min(requested - non_kv, headroom - margin) - peak

        def tokens(scenario: Scenario, kv: int) -> int:
            blocks = kv // _value(scenario, "bytes_per_block") if kv > 0 else 0
            return int(blocks / _value(scenario, "blocks_per_request") * context)

        def measure(scenario: Scenario | None, draft: bool) -> Scenario | None:
            if scenario is None:
                return None
            kv = estimate(draft, 1.0)
            low, high = (tokens(scenario, estimate(draft, s)) for s in reversed(INTERVAL))
            point = self._at(pair, gpu, kv, draft)
            lines = [
                line(key="requested", label="requested = ceil(total · gpu_memory_utilization)",
                     value=requested, unit="B",
                     rule=f"ceil({gpu.memory_bytes} · {args.gpu_memory_utilization:g}); "
                          "1.0 is the extensible cache's default (config/cache.py:495-501)"),
                line(key="kv_available", label="KV memory, ESTIMATED (the engine measures "
                     "it after warmup)", value=kv, unit="B",
                     rule="min(requested − non_kv_used, headroom − margin) − transient peak, "
                          "margin = max(1 GiB, 0.75 · transient peak); non_kv_used = weights "
                          "+ non-torch + CUDA graphs and transient peak = activation peak are "
                          "the assumptions above, measured by the engine at start-up "
                          "(v1/worker/extensible_kv_cache.py:592-618)"),
                line(key="capacity_interval", label="token capacity, interval of the "
                     "estimate", value=f"{low}–{high}", unit="tokens",
                     rule=f"the measured terms at {INTERVAL[0]}× to {INTERVAL[1]}× their "
                          "assumed values; `specpair staging ingest` of the start-up log "
                          "gives the engine's own figure ('KV cache size: N tokens')")]
            estimated = {key: [x.model_copy(update={"label": f"{x.label}, ESTIMATED"})]
                         for x in point.lines if (key := x.key) in ESTIMATED_LINES}
            return _with(point, {"kv_available": lines, "requested": [], **estimated},
                         verdict=f"estimate, measured at start-up: {point.verdict}")

        baseline = measure(computed.baseline, False)
        assert baseline is not None
        speculative = measure(computed.speculative, True)
        logged = pair.logged_kv_capacity()
        if logged is not None and speculative is not None:
            speculative = self._logged(pair, speculative, *logged)
        return computed.model_copy(update={"baseline": baseline, "speculative": speculative})

    def _logged(self, pair: EngineInput, scenario: Scenario, tokens: int, when: str
                ) -> Scenario:
        """The capacity the engine reported at a recorded start of this command (the
        server with the draft, as stage-and-launch.sh starts it) in place of the estimate:
        the estimate's lines stay, labelled as such."""
        context = pair.runbook.deployment.context_length
        args = self.server_args(pair, pair.gpu_spec)
        sequences = tokens // context
        measured = line(
            key="capacity_logged", label="token capacity, MEASURED (the engine's start-up log)",
            value=tokens, unit="tokens",
            rule=f"'KV cache size: N tokens' (v1/core/kv_cache_utils.py:1169) in the engine log "
                 f"of the start recorded {when} (`specpair staging ingest --engine-log`); "
                 f"full-context sequences ≈ {tokens} // {context}")
        return _with(scenario, {"capacity_interval": [measured]}, max_total_tokens=tokens,
                     sequences_at_context=sequences, fits=sequences >= 1,
                     max_running_requests=min(args.running_requests, tokens),
                     verdict=f"measured at the start recorded {when}: {tokens:,} tokens, "
                             f"≈ {sequences} full-context sequences")

    def _at(self, pair: EngineInput, gpu: GPU, kv: int, draft: bool) -> Scenario:
        """0.33.0's scenario of the pair with `kv` KV bytes (its `--kv-cache-memory-bytes`
        path: the pool, blocks and capacity lines of those bytes)."""
        dep = pair.runbook.deployment
        fixed = pair.model_copy(update={"runbook": pair.runbook.model_copy(update={
            "deployment": dep.model_copy(update={"kv_cache_memory_bytes": kv})})})
        computed = super().budget(fixed, gpu)
        scenario = computed.speculative if draft else computed.baseline
        assert scenario is not None
        return scenario


RULES = Rules(ENGINE)
state_plan = RULES.state_plan
block_plan = RULES.block_plan
kv_plan = RULES.kv_plan
budget = RULES.budget
recap = RULES.recap
reschedule = RULES.reschedule


def pinned_kv_bytes(pair: EngineInput, speculate: bool) -> int:
    """The KV bytes the pinned launch passes: deployment.kv_cache_memory_bytes, else 0.33.0's
    closed form (`v0_33_0.Rules.budget`'s available KV memory: requested − weights −
    non-torch − activation peak − CUDA graphs) at the pinned memory fraction, which is
    what `Rules._pinned` shows (tests/test_vllm_0_34_0.py holds them equal). It reads no
    KV layout, so a translation whose layout is not modelled is pinned too. At least 1:
    the flag takes a positive number, and the launch refuses a pair with none left."""
    dep = pair.runbook.deployment
    if dep.kv_cache_memory_bytes is not None:
        return dep.kv_cache_memory_bytes
    gpu = pair.gpu_spec
    args = server_args(pair, gpu)
    a = dep.assumptions
    tp, pp = dep.parallel.tensor, dep.parallel.pipeline
    weights = weights_per_rank(pair.target_own_weight_bytes,
                               pair.target.weights.replicated_bytes, tp * pp)
    if speculate and pair.draft is not None:
        weights += weights_per_rank(pair.draft.weights.weight_bytes,
                                    pair.draft.weights.replicated_bytes,
                                    dep.parallel.draft_tensor or tp)
    engine = sum(value if value is not None else default for value, default in (
        (a.other_allocations_bytes, v0_33_0.DEFAULT_NON_TORCH),
        (a.activation_peak_bytes, v0_33_0.DEFAULT_ACTIVATION_PEAK),
        (a.cuda_graph_bytes, v0_33_0.DEFAULT_CUDA_GRAPHS)))
    requested = math.ceil(gpu.memory_bytes * args.gpu_memory_utilization)
    return max(requested - weights - engine, 1)
