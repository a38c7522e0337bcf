"""Published points and their schema: the models they name and one measurement each.

A point is one published speculative-decoding measurement (`data/calibration.yaml`,
`data/published_points.yaml`, `data/held_out_points.yaml`, or a user's own file in the
same schema): its GPU, engine, parallelism, draft shape, workload and what the source
measured. It says how it is to be counted (its batch per replica, the throughput's
scope) and, by name, why the step model refuses it where it does.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Literal

from pydantic import Field

from specpair.analyse.stepmodel import Architecture, Shape, drafter_family, shape_for
from specpair.model.common import Strict
from specpair.model.geometry import EXPERT_FORMAT_BYTES
from specpair.model.step_refusals import NotModelled as NotModelledDeployment
from specpair.model.step_refusals import deployment_refusal

FP8_BYTES = 1.0

GPUS_PER_NODE = 8
"""A `per_node` throughput counts one 8-GPU node (HGX / MI300X platform)."""

DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5,
               "nvfp4": EXPERT_FORMAT_BYTES["nvfp4"], "mxfp4": EXPERT_FORMAT_BYTES["mxfp4"]}
"""Weight bytes per parameter as served (FP4 formats with their block scales: NVFP4 one
FP8 scale per 16 values, MXFP4 one E8M0 scale per 32). NVFP4 checkpoints (ModelOpt) are
W4A4, activations quantized to FP4 too: they use the FP4 tensor peak where the catalog has
one (Blackwell), else FP8's. MXFP4 (gpt-oss) runs with 8- or 16-bit activations (W4A8 on
Blackwell, W4A16 on Hopper): it and the other low-precision formats use the FP8 peak."""


class CalibrationError(ValueError):
    """A points file or a lookup the model cannot serve (unknown GPU, method, model)."""


class ModelSpec(Strict):
    params: float
    bytes_per_param: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int | None = None
    attention_layers: int | None = Field(default=None, description="layers keeping KV of "
                                         "the whole context (default: all)")
    kv_lora_rank: int | None = Field(default=None, description="MLA: latent KV rank")
    qk_rope_head_dim: int | None = None
    experts: int | None = None
    top_k: int | None = None
    expert_params: float | None = None
    moe_layers: int | None = Field(default=None, description="layers with routed experts "
                                   "(default: all)")
    active_params: float | None = None
    dtype: str | None = Field(default=None, description="weight dtype; FP8 (or 1 byte per "
                              "parameter) uses the GPU's FP8 tensor peak")
    expert_dtype: str | None = Field(default=None, description="the routed experts' own "
                                     "stored format where it differs from the rest (gpt-oss: "
                                     "mxfp4 experts beside BF16 attention and embeddings); "
                                     "`bytes_per_param` stays the whole checkpoint's")
    attention: Literal["mha", "mla"] | None = None
    hidden: int | None = Field(default=None, description="config hidden_size (information)")
    intermediate: int | None = Field(default=None, description="config intermediate_size "
                                     "(information)")
    block_size: int | None = Field(default=None, description="block drafters: config "
                                   "block_size (information)")
    sliding_window: int | None = Field(default=None, description="tokens a windowed layer "
                                       "attends to")
    sliding_window_layers: int = Field(default=0, description="layers with windowed "
                                       "attention (their KV read stops at the window)")
    weights_note: str | None = None
    source: str

    @property
    def fp4(self) -> bool:
        """NVFP4 (W4A4) weights: FP4 tensor-core GEMMs where the GPU has them."""
        return (self.dtype or "").lower().startswith("nvfp4")

    @property
    def fp8(self) -> bool:
        return (self.dtype or "").lower().startswith(("fp8", "f8", "nvfp4", "mxfp4", "int")) \
            or self.bytes_per_param <= FP8_BYTES

    def served_as(self, dtype: str | None) -> ModelSpec:
        """The model as served in `dtype` (a point's target_dtype / draft_dtype)."""
        if dtype is None:
            return self
        size = DTYPE_BYTES.get(dtype.lower())
        if size is None:
            raise CalibrationError(f"unknown weight dtype {dtype!r}: use one of "
                                   f"{', '.join(sorted(DTYPE_BYTES))}")
        if self.expert_dtype is not None and dtype.lower() == self.expert_dtype.lower():
            # the published checkpoint itself: experts in their format, the rest as stored
            return self.model_copy(update={"dtype": dtype})
        return self.model_copy(update={"bytes_per_param": size, "dtype": dtype,
                                       "expert_dtype": None})

    def architecture(self) -> Architecture:
        attention_layers = self.attention_layers if self.attention_layers is not None \
            else self.layers - self.sliding_window_layers
        kv_dtype_bytes = 2  # the points' KV caches are BF16 unless the source says otherwise
        if self.kv_lora_rank and self.attention != "mha":
            kv = (self.kv_lora_rank + (self.qk_rope_head_dim or 0)) * attention_layers \
                * kv_dtype_bytes
            per_head: int | None = 2 * self.kv_lora_rank + (self.qk_rope_head_dim or 0)
            prefill: int | None = self.head_dim + (self.qk_rope_head_dim or 0) \
                + (self.v_head_dim or self.head_dim)
            kv_heads = 1
        else:
            kv = 2 * self.kv_heads * self.head_dim * attention_layers * kv_dtype_bytes
            per_head, prefill, kv_heads = None, None, self.kv_heads
        routed = 0.0
        if self.experts and self.top_k and self.expert_params:
            routed = self.experts * self.expert_params * (self.moe_layers or self.layers)
        return Architecture(
            params=self.params, bytes_per_param=self.bytes_per_param, layers=self.layers,
            attention_layers=attention_layers, heads=self.heads, kv_heads=kv_heads,
            head_dim=self.head_dim, v_head_dim=self.v_head_dim or self.head_dim,
            kv_bytes_per_token=kv, active_params=self.active_params,
            experts=self.experts or 0, top_k=self.top_k or 0, routed_params=routed,
            routed_bytes_per_param=DTYPE_BYTES[self.expert_dtype.lower()]
            if self.expert_dtype and routed else 0.0,
            attention_per_head=per_head, prefill_per_head=prefill, fp8=self.fp8, fp4=self.fp4,
            window_layers=self.sliding_window_layers if self.sliding_window else 0,
            window=self.sliding_window or 0, hidden=self.hidden or 0)


_shape = cache(shape_for)


class Point(Strict):
    id: str
    sweep: str | None = None
    role: Literal["fit", "validate"] = "fit"
    source_id: str | None = Field(default=None, description="one id per independent "
                                  "source (leave-one-source-out holds these out together)")
    gpu: str
    engine: Literal["vllm", "sglang"]
    engine_version: str
    async_scheduling: bool | None = None
    tp: int = 1
    ep: int = 1
    draft_tp: int | None = Field(default=None, description="the draft's own TP (default: "
                                 "the target's)")
    gpu_p2p: bool | None = Field(default=None, description="false where the source says "
                                 "the GPUs lack peer-to-peer (all-reduces staged through "
                                 "host memory); default: as the card ships")
    target: str
    draft: str | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    num_steps: int | None = None
    topk: int = 1
    num_draft_tokens: int | None = None
    block_size: int | None = None
    concurrency: int
    context: int
    workload: str
    baseline_tok_s: float | None = None
    speculative_tok_s: float | None = None
    speedup: float | None = None
    tau: float | None = None
    source: str
    url: str | None = None
    note: str = ""
    # optional conditions (published_points.yaml's header documents each)
    source_group: str | None = None
    sweep_kind: Literal["concurrency", "depth", "config"] | None = None
    gpu_count: int | None = None
    throughput_scope: Literal["system", "per_gpu", "per_node", "per_rank",
                              "per_user"] = "system"
    dp_attention: bool = False
    target_dtype: str | None = None
    draft_dtype: str | None = None
    input_len: float | None = None
    output_len: float | None = None
    prefill_disaggregated: bool = Field(default=False, description="prompts prefilled on "
                                        "other GPUs (prefill/decode disaggregation): none "
                                        "ride along with the decode steps measured")
    baseline_tpot_ms: float | None = None
    speculative_tpot_ms: float | None = None
    speedup_metric: Literal["output_throughput", "e2e_latency", "tpot", "tpot_ratio"] | None \
        = None
    tau_source: str | None = None
    prompts: int | None = Field(
        default=None, gt=0, description="requests in the whole benchmark run, where the "
        "source states it (SpecForge bench_eagle3.py's 'mtbench:20' runs 20 questions): "
        "a run never holds more than this many at once, whatever its concurrency")
    fixed_prompt_set: bool = Field(
        default=False, description="the source's runs are one fixed set of prompts whose "
        "size it does not publish, and its own figures show it (e.g. wall time × throughput "
        "the same total tokens at every concurrency): a throughput over such a run at "
        "concurrency > 1 includes the set's drain, the last requests finishing with fewer "
        "than the concurrency running, whose length the unpublished set size and output "
        "lengths decide (`FINITE_RUN`)")
    all_at_once: bool = Field(
        default=False, description="the benchmark sent all of its `prompts` requests at "
        "once, with no concurrency cap (vllm bench serve / sglang.bench_serving at request "
        "rate inf without --max-concurrency), where the source's command shows it: the "
        "engine, not the benchmark, sets how many run at once, and the wall time is the "
        "prefill wave, the queue and the drain (`BURST_RUN`)")
    prefix_cached: bool = Field(
        default=False, description="the benchmark's prompts share a prefix the engine serves "
        "from its prefix cache (e.g. SGLang bench_serving generated-shared-prefix): only "
        "their unshared tail is prefilled, by an amount the source does not publish per "
        "request (`PREFIX_CACHED`)")
    verify_attention: Literal["per-query-head"] | None = Field(
        default=None, description="the kernel the speculative run's verify attention ran, "
        "where it is not the one-pass kind the step model costs, from the source's engine "
        "release and launch command: 'per-query-head' is one program per sequence and query "
        "head, each reading the sequence's whole cached KV and computing a padded tile of "
        "query rows (SGLang's Triton extend kernel on an absorbed-MLA model, the MLA "
        "default up to v0.4.5: grid (batch, heads, ceil(w / BLOCK_M)), BLOCK_M 32 on "
        "Hopper, num_stages 1), where the step model reads each sequence's KV once and "
        "computes only the verified rows (`PER_HEAD_VERIFY`; benchmarks/"
        "per_head_verify_bound.py charges a lower bound of the difference)")
    speculative_max_running_requests: int | None = Field(
        default=None, gt=0, description="the most requests the speculative run decoded at "
        "once per engine instance, where the source's launch command or its engine release "
        "fixes it below the concurrency (SGLang resets --max-running-requests to 48 for "
        "EAGLE/NEXTN when it is not given); the rest of the concurrency queues")
    speculative_running_requests: float | None = Field(
        default=None, gt=0, description="the mean number of requests the speculative run's "
        "engine held running at once per engine instance, as the source's own engine log "
        "measured it over the run, where fewer than the concurrency ran while others "
        "waited (e.g. vLLM's 10 s 'Running: N reqs, Waiting: M reqs' lines with its KV "
        "pool, 'GPU KV cache size: N tokens', full: the scheduler admits a request only "
        "when the pool has blocks for it); the rest of the concurrency queues")

    @property
    def replicas(self) -> int:
        """Data-parallel copies of the TP × PP group the throughput spans (gpu_count)."""
        if self.dp_attention or not self.gpu_count:
            return 1
        return max(1, self.gpu_count // self.tp)

    @property
    def batch(self) -> int:
        """Sequences in one forward of one replica (per rank under DP attention); no more
        than the replica's share of the run's requests (`prompts`)."""
        batch = max(1, round(self.concurrency / self.replicas))
        return min(batch, math.ceil(self.prompts / self.replicas)) if self.prompts else batch

    @property
    def speculative_batch(self) -> int:
        """Sequences in one speculative forward: the batch, or fewer where the speculative
        run's engine capped its running requests, or its log measured fewer running (a
        full KV pool), rounded to whole sequences. The others wait in its queue and yield
        nothing: the system's throughput is the running batch's tokens per step over the
        step time at that batch (by Little's law a closed-loop benchmark's latency ratio
        is then the ratio of the throughputs at the two runs' batches)."""
        batch = self.batch
        if self.speculative_max_running_requests is not None:
            batch = min(batch, self.speculative_max_running_requests)
        if self.speculative_running_requests is not None:
            batch = min(batch, max(1, round(self.speculative_running_requests)))
        return batch

    def published_scale(self, per_forward: float, batch: int | None = None) -> float:
        """One replica's output tokens/s as the source's `throughput_scope` counts them
        (`batch`: the sequences of that forward, default the point's batch)."""
        if self.throughput_scope == "per_user":
            return per_forward / (batch or self.batch)
        if self.throughput_scope in ("per_gpu", "per_rank"):
            return per_forward if self.dp_attention else per_forward / self.tp
        system = per_forward * (self.tp if self.dp_attention else self.replicas)
        if self.throughput_scope == "per_node":
            return system * GPUS_PER_NODE / (self.gpu_count or GPUS_PER_NODE)
        return system

    @property
    def source_key(self) -> str:
        """The independent source: `source_id`, else the source text up to its first
        parenthesis (today's points name one run per source that way)."""
        return self.source_id or self.source.split(" (")[0].strip()

    @property
    def refusal(self) -> NotModelledDeployment | None:
        """The step model's named refusal of this point's deployment (the check a
        runbook's deployment gets, `stepmodel.deployment_refusal`), or of its measurement
        (`FINITE_RUN`, `PREFIX_CACHED`, `BURST_RUN`), or of its verify kernel
        (`PER_HEAD_VERIFY`), or None."""
        why = deployment_refusal(self.tp, 1, self.ep, GPUS_PER_NODE, self.dp_attention)
        if why is None and self.fixed_prompt_set and self.prompts is None \
                and self.concurrency > 1:
            why = NotModelledDeployment(FINITE_RUN, (
                f"a throughput at concurrency {self.concurrency} over one fixed prompt set "
                "of unpublished size: the run's wall time includes its drain (the last "
                "requests finishing with fewer running), which the step model's steady "
                "batch cannot time without the set's size and output lengths"))
        if why is None and self.prefix_cached:
            why = NotModelledDeployment(PREFIX_CACHED, (
                "prompts sharing a prefix served from the engine's prefix cache: the "
                "prefill that rides along with the decode steps is only the uncached tail "
                "of each prompt, which the source does not publish, and the step model "
                "would charge the whole prompt"))
        if why is None and self.verify_attention == "per-query-head" and self.method:
            why = NotModelledDeployment(PER_HEAD_VERIFY, (
                "the verify's attention ran one program per sequence and query head, each "
                "reading the whole cached prefix and computing a padded tile of query rows: "
                "every sequence's KV is read once per query head, and BLOCK_M rows are "
                "computed for the w verified, with no load pipelining; its time at the "
                "point's shapes has not been measured, and the step model's one-pass "
                "attention charges less than a lower bound of it"))
        if why is None and self.all_at_once and self.concurrency > 1:
            why = NotModelledDeployment(BURST_RUN, (
                f"all {self.prompts or self.concurrency} requests sent at once, with no "
                "concurrency cap: how many run at once is the engine's (its running-request "
                "limit and KV pool), not the benchmark's, and the run's wall time is the "
                "prefill wave, the queue behind the pool and the drain, which one steady "
                "decode batch cannot time"))
        return why

    @property
    def published_speedup(self) -> float | None:
        if self.baseline_tok_s and self.speculative_tok_s:
            return self.speculative_tok_s / self.baseline_tok_s
        return self.speedup

    @property
    def drafter(self) -> str:
        return "none" if self.method is None else drafter_family(self.method)

    @property
    def depth(self) -> int:
        return self.shape.max_tokens - 1

    @property
    def shape(self) -> Shape:
        return _shape(self.method or "NONE", self.num_speculative_tokens, self.block_size,
                      self.num_steps, self.topk, self.num_draft_tokens)


FINITE_RUN = "finite run of unpublished size"
"""A measurement refused by name: `Point.fixed_prompt_set` without `prompts`, at a
concurrency above 1 (at 1 the run has no drain: every request runs alone)."""

PREFIX_CACHED = "prompts served from the prefix cache"
"""A measurement refused by name: `Point.prefix_cached`."""

PER_HEAD_VERIFY = "verify attention per query head, not measured"
"""A measurement refused by name: `Point.verify_attention` 'per-query-head' on a
speculative point, whose verify cost is a kernel measurement at the point's batch,
context, heads and verify width that has not been made (benchmarks/device/
triton_verify_mla.py makes it; benchmarks/per_head_verify_bound.py shows what a lower bound
of it, charged alone, gives)."""

BURST_RUN = "burst of every request at once"
"""A measurement refused by name: `Point.all_at_once`, at a concurrency above 1 (one
request sent alone is a batch-1 run)."""


class NotModelled(Strict):
    source: str
    reason: str


class PointsFile(Strict):
    """A file of published points: the calibration schema's models and points."""

    models: dict[str, ModelSpec] = Field(default_factory=dict)
    points: list[Point]
    not_modelled: list[NotModelled] = Field(default_factory=list)
    sources: list[dict[str, str]] = Field(default_factory=list)
