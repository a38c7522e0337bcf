"""The authored runbook: what a serving engineer writes and reviews for one pair.

Shapes, types and ranges are checked here by pydantic; rules that relate several fields
(a method that needs a block size, a TP that must divide the GPUs) are checked in
`specpair.load.rules`, so that each error can point at the field it is about.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationInfo,
    field_validator,
)

from specpair.model.alerting import AlertWindows
from specpair.model.autoscaling import Autoscaling
from specpair.model.canary import Canary
from specpair.model.common import (
    ArchitectureName,
    CommitSha,
    KVDtype,
    LocalPath,
    LongText,
    Method,
    NonNegativeInt,
    PositiveInt,
    PromptText,
    RepoId,
    ShortText,
    Slug,
    Strict,
    WeightDtype,
)
from specpair.model.geometry import GeometryOverride
from specpair.model.kubernetes import Kubernetes

Revision = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")]


class Pair(Strict):
    name: Slug = Field(description="folder-safe identifier: lowercase letters, digits, dashes")
    title: ShortText
    owner: ShortText = Field(description="team or person who answers for this pair")
    description: LongText = ""


class EngineName(StrEnum):
    SGLANG = "sglang"
    VLLM = "vllm"


class Engine(Strict):
    name: EngineName
    version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = Field(
        description="exact engine release; its flags and memory rules are used")


class Artifact(Strict):
    """A checkpoint: a Hugging Face repo at a pinned revision, or a local directory."""

    repo: RepoId | None = Field(default=None, description="Hugging Face repo id, owner/name")
    path: LocalPath | None = Field(default=None, description="local checkpoint directory")
    revision: Revision | None = Field(
        default=None, description="commit (40 hex) to pin; a branch or tag is flagged by check")
    dtype: WeightDtype = WeightDtype.AUTO
    quantization: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,32}$")] | None = None
    trust_remote_code: bool = False


class Draft(Artifact):
    bundled: bool = Field(
        default=False,
        description="the draft lives inside the target checkpoint (MTP/NEXTN layers, bundled "
                    "DSpark weights): one download, still two KV pools")


class ScheduleRange(Strict):
    """One batch-size range of a speculation schedule (vLLM's inclusive
    [start, end, K] entries of `num_speculative_tokens_per_batch_size`)."""

    start: PositiveInt = Field(description="smallest batch (running requests), inclusive")
    end: PositiveInt = Field(description="largest batch (running requests), inclusive")
    k: NonNegativeInt = Field(description="draft tokens per step in this range; 0 drafts "
                                          "nothing (the target alone)")


def _schedule_form(value: object) -> str:
    return "ranges" if isinstance(value, list) else "derived"


Schedule = Annotated[
    Annotated[Literal["derived", "static"], Tag("derived")] | Annotated[list[ScheduleRange],
                                                              Tag("ranges")],
    Discriminator(_schedule_form)]
"""`derived`, or ranges pinned by hand; only the form the value has is validated, so an
error names the field it is about."""
UNION_TAGS = frozenset({"derived", "ranges"})
"""The tags of the schema's tagged unions: pydantic puts them into an error's location,
where they name no field (the loader drops them)."""


class Speculation(Strict):
    method: Method
    num_speculative_tokens: PositiveInt | None = Field(
        default=None, description="γ: draft tokens proposed per step (chain drafters, NGRAM)")
    block_size: PositiveInt | None = Field(
        default=None, description="checkpoint block size of a block drafter (DFLASH: verify "
                                  "window; DSPARK: gamma, verify width gamma + 1)")
    num_steps: PositiveInt | None = Field(default=None, description="EAGLE tree depth")
    topk: PositiveInt = Field(default=1, description="EAGLE branching factor per step")
    num_draft_tokens: PositiveInt | None = Field(
        default=None, description="tree verify width; required when topk > 1")
    ngram_min_match: PositiveInt | None = None
    ngram_max_match: PositiveInt | None = None
    heterogeneous_vocab: bool = Field(
        default=False, description="vLLM use_heterogeneous_vocab: the draft has its own "
                                   "tokenizer; the engine drafts on the token-level "
                                   "intersection of both vocabularies (STANDALONE only)")
    draft_sample_method: Literal["greedy", "probabilistic"] | None = Field(
        default=None, description="vLLM draft_sample_method; unset = the engine's default "
                                  "(greedy). The heterogeneous mode drafts greedily only")
    local_argmax_reduction: bool = Field(
        default=False, description="vLLM use_local_argmax_reduction (vocab-parallel argmax "
                                   "for greedy drafting)")
    schedule: Schedule | None = Field(
        default=None, description="draft length by load: `static` or unset (the static "
        "num_speculative_tokens), `derived` (specpair derives, per "
        "batch-size range, the K of most goodput from the step model and acceptance by "
        "depth, K = 0 where no depth beats the target alone), or ranges pinned by hand "
        "({start, end, k}, from batch 1, contiguous, k ≤ num_speculative_tokens). "
        "num_speculative_tokens is the largest K a schedule may use")

    @field_validator("schedule")
    @classmethod
    def _static_is_no_schedule(cls, value: object) -> object:
        return None if value == "static" else value


class ParallelSizes(Strict):
    tensor: PositiveInt = 1
    expert: PositiveInt = 1
    data: PositiveInt = 1
    pipeline: PositiveInt = 1
    draft_tensor: PositiveInt | None = Field(
        default=None, description="vLLM draft_tensor_parallel_size: 1 or the target's TP")


class Assumptions(Strict):
    """What the engine measures at start-up and we can only assume (bytes per rank)."""

    free_before_load_bytes: PositiveInt | None = Field(
        default=None, description="P: free memory per rank after CUDA/NCCL init, before "
                                  "weights load; defaults per GPU model")
    other_allocations_bytes: NonNegativeInt | None = Field(
        default=None, description="allocations between weight load and KV profiling")
    activation_peak_bytes: NonNegativeInt | None = Field(
        default=None, description="vLLM: activation peak of the profile run per rank")
    cuda_graph_bytes: NonNegativeInt | None = Field(
        default=None, description="vLLM: CUDA-graph memory estimate per rank")
    unverified_layouts: list[ArchitectureName] = Field(
        default_factory=list,
        description="architectures to budget although the KV oracle has not verified their "
                    "layout for this engine release (its verified_layouts.yaml); every "
                    "output marks the budget unverified and the gate's SP603 fails unless "
                    "waived")


class LinearState(Strict):
    """SGLang knobs for the per-request state of linear-attention (KDA/Mamba) layers."""

    replay_spec: bool = Field(default=False,
                              description="--enable-linear-replayssm-spec (KDA ring per slot)")
    replay_cache_len: PositiveInt = Field(default=16, description="--linear-replayssm-cache-len")
    ssm_dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        default=None, description="--mamba-ssm-dtype; unset = float32")
    full_memory_ratio: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None, description="--mamba-full-memory-ratio; unset = 0.9")
    max_cache_size: PositiveInt | None = Field(default=None, description="--max-mamba-cache-size")
    radix_cache_strategy: Literal["auto", "extra_buffer", "no_buffer"] = "auto"
    disable_radix_cache: bool = False


class InlineGPU(Strict):
    """A GPU outside the catalog, declared with its data-sheet figures (per GPU, dense)."""

    name: ShortText
    # physical ranges, far past any device: 1e-300 TB/s or 1e300 GiB ended in divisions by
    # zero and infinities deep in the budget
    memory_mib: Annotated[int, Field(gt=0, le=1 << 30)] = Field(
        description="total memory as nvidia-smi reports it, MiB")
    bandwidth_tb_s: Annotated[float, Field(ge=1e-6, le=1e3)] = Field(
        description="peak bandwidth, TB/s")
    bf16_dense_tflops: Annotated[float, Field(ge=1e-6, le=1e6)] = Field(
        description="peak dense BF16 tensor TFLOP/s (without sparsity)")
    fp8_dense_tflops: Annotated[float, Field(ge=1e-6, le=1e6)] | None = Field(
        default=None, description="peak dense FP8 tensor TFLOP/s; unset = no FP8 tensor cores")
    measured_bandwidth_tb_s: Annotated[float, Field(ge=1e-6, le=1e3)] | None = Field(
        default=None, description="what a bandwidth test's fastest reading kernel reaches "
                                  "on this GPU on large arrays (BabelStream's best of Copy, "
                                  "Mul, Add, Triad, Dot), TB/s; unset = the catalog's "
                                  "median measured share of the peak, assumed")
    free_before_load_gib: Annotated[float, Field(ge=1e-3, le=1 << 20)] | None = Field(
        default=None, description="free memory per rank before weights load; unset = total "
                                  "less 2 GiB")

    @field_validator("measured_bandwidth_tb_s")
    @classmethod
    def _measured_within_peak(cls, value: float | None, info: ValidationInfo) -> float | None:
        peak = info.data.get("bandwidth_tb_s")
        if value is not None and peak is not None and value > peak:
            raise ValueError(f"a measured bandwidth of {value:g} TB/s exceeds the "
                             f"{peak:g} TB/s peak (bandwidth_tb_s): set the measured "
                             "figure a bandwidth test printed, at most the peak")
        return value


class Deployment(Strict):
    gpu: ShortText | InlineGPU = Field(
        description="a GPU catalog key (any case), e.g. H200-141GB, or a GPU declared inline")
    gpus_per_node: PositiveInt = 8
    nodes: PositiveInt = 1
    parallel: ParallelSizes = ParallelSizes()
    memory_fraction: Annotated[float, Field(gt=0, lt=1)] | None = Field(
        default=None, description="SGLang --mem-fraction-static / vLLM "
                                  "--gpu-memory-utilization; unset = engine default")
    context_length: PositiveInt
    kv_cache_dtype: KVDtype = KVDtype.AUTO
    draft_kv_cache_dtype: KVDtype | None = Field(
        default=None, description="draft pool KV dtype; unset = kv_cache_dtype")
    page_size: PositiveInt | None = Field(
        default=None, description="tokens per KV page/block; unset = engine default")
    max_running_requests: PositiveInt | None = None
    concurrency: PositiveInt | None = Field(
        default=None, description="expected concurrent requests in production; "
                                  "unset = max_running_requests")
    mean_context: PositiveInt | None = Field(
        default=None, description="expected tokens in context per sequence while decoding "
                                  "(mean prompt plus half the mean output); unset = from "
                                  "the workloads")
    cuda_graphs: bool = Field(
        default=True, description="false runs eagerly (vLLM --enforce-eager; SGLang decode "
                                  "and prefill graph backends disabled)")
    kv_cache_memory_bytes: PositiveInt | None = Field(
        default=None, description="vLLM --kv-cache-memory-bytes: fixed KV budget per rank")
    kv_cache_sizing: Literal["pinned", "measured"] = Field(
        default="pinned", description="for engines that size the KV cache from memory "
        "measured at start-up (vLLM 0.34.0's extensible cache): pinned = specpair passes the "
        "KV bytes it budgets (--kv-cache-memory-bytes), so the capacity is the budget's; "
        "measured = the engine sizes it after warmup, the budget is an estimate with an "
        "interval. Pinned is the default because the capacity the gate and the budget "
        "review is then the one the engine allocates; a measured cache moves with what "
        "else holds GPU memory at start-up. Engines that size it from a profile run have "
        "one mode and ignore this")
    linear_state: LinearState = LinearState()
    hybrid_kv_pools: bool = Field(
        default=True, description="false switches the engine's hybrid KV manager off "
        "(SGLang --disable-hybrid-swa-memory, vLLM --disable-hybrid-kv-cache-manager): "
        "sliding-window layers then keep a full-length cache, and the budget follows")
    host: Annotated[str, StringConstraints(  # a leading `-` would be read as an option
        pattern=r"^[A-Za-z0-9.:\[\]][A-Za-z0-9.:\[\]-]{0,254}$")] = "0.0.0.0"
    port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="the server's HTTP port; unset: the engine release's own "
        "default (SGLang 30000, vLLM 8000), so a vLLM pair is not moved to SGLang's port")
    assumptions: Assumptions = Assumptions()
    autoscaling: Autoscaling | None = Field(
        default=Autoscaling(), description="replicas that follow demand over the token "
        "capacity at the live acceptance length (a KEDA ScaledObject); null: no autoscaler")


class AcceptanceReference(Strict):
    mean_length: Annotated[float, Field(ge=1, le=1000)] = Field(
        description="τ, accepted tokens per verify step including the bonus token")
    source: ShortText = Field(description="where the number comes from (card, paper, run)")
    workload: ShortText | None = None


class SloProvenance(Strict):
    """Where an own_traffic SLO comes from: a replay record or a Prometheus query."""

    source: Literal["record", "prometheus"]
    reference: ShortText = Field(description="the record's file name under measurements/, "
                                             "or the PromQL expression queried")
    start: ShortText = Field(description="UTC start of the measured traffic")
    end: ShortText = Field(description="UTC end of the measured traffic")
    samples: PositiveInt = Field(description="per-request τ values (record) or evaluated "
                                             "windows (Prometheus) the SLO rests on")
    value: Annotated[float, Field(ge=1, le=1000)] = Field(
        description="the measured percentile of τ at the SLO's scope")
    interval_low: Annotated[float, Field(ge=1, le=1000)]
    interval_high: Annotated[float, Field(ge=1, le=1000)]
    margin: Annotated[float, Field(ge=0, lt=1)] = Field(
        description="the SLO is the interval's low end less this fraction")


class AcceptanceSLO(Strict):
    min_length: Annotated[float, Field(ge=1, le=1000)] = Field(
        description="minimum acceptance length τ the deployment must keep")
    scope: Literal["per_request", "per_batch"] = "per_request"
    percentile: Annotated[int, Field(ge=1, le=99)] = 10
    basis: Literal["own_traffic", "benchmark", "provisional"] = Field(
        default="provisional",
        description="own_traffic: measured on this service's traffic; benchmark: taken from a "
                    "published benchmark; provisional: set before any measurement")
    provenance: SloProvenance | None = Field(
        default=None, description="what an own_traffic SLO was proposed from (`specpair slo "
        "propose --write` sets it); the gate accepts own_traffic only with it")


class Regression(Strict):
    """Tolerances of `specpair bench --against RECORD`, per class of the replayed traffic."""

    tau_drop: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.05, description="largest relative fall of mean τ at any draft depth")
    fallback_rise: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.0, description="largest rise of the share of requests that ran without "
                                 "speculation (absolute)")
    throughput_drop: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.2, description="largest relative fall of output tokens/s at the same "
                                 "concurrency")


class Acceptance(Strict):
    reference: AcceptanceReference | None = Field(
        default=None, description="published acceptance length, if any")
    slo: AcceptanceSLO
    regression: Regression = Field(
        default_factory=Regression, description="tolerances of `specpair bench --against`")


class Warmup(Strict):
    prompt: PromptText = "Say hello."
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = 16
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0


ArtifactRole = Literal["target", "draft"]
# physical ranges: 1e-300 B/s made a cold start of 1e309 s (an infinity in the plan)
BytesPerSecond = Annotated[float, Field(ge=1e3, le=1e13, description="1 kB/s to 10 TB/s")]
Seconds = Annotated[float, Field(ge=1, le=1e7)]
Seconds0 = Annotated[float, Field(ge=0, le=1e7)]


def _draft_first() -> list[ArtifactRole]:
    return ["draft", "target"]


class Staging(Strict):
    mode: Literal["serial", "parallel-prestage", "engine-prefetch", "engine-overlap"] = (
        "parallel-prestage")
    order: list[ArtifactRole] = Field(default_factory=_draft_first,
                                      description="download/verify order; smaller first fails fast")
    warmup: Warmup = Warmup()
    cold_start_budget_s: Seconds = 900.0
    storage_bandwidth_bytes_per_s: BytesPerSecond = Field(
        default=2e9, description="local disk read bandwidth per node")
    network_bandwidth_bytes_per_s: BytesPerSecond = Field(
        default=1.25e9, description="the node's link to the hub or mirror")
    stream_bandwidth_bytes_per_s: BytesPerSecond = Field(
        default=0.5e9, description="what one download stream reaches")
    graph_capture_s: Seconds0 = Field(
        default=60.0, description="assumption: CUDA-graph capture of target and draft")
    warmup_s: Seconds0 = Field(
        default=5.0, description="assumption: the warmup request's duration")
    engine_init_s: Seconds0 = Field(
        default=0.0, description="assumption: engine start besides weight load and graph "
                                 "capture (imports, compilation, memory profiling); "
                                 "`specpair staging calibrate` measures it")


class Codesign(Strict):
    feature_layers: list[NonNegativeInt] | None = Field(
        default=None, description="target layer ids the draft reads hidden states from")
    block_size: PositiveInt | None = Field(
        default=None, description="block size the draft checkpoint was trained with")


Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


TokenCount = Annotated[int, Field(ge=1, le=1_048_576)]


class TokenRange(Strict):
    """Lengths spread evenly over [min, max]: each request's drawn from the workload's seed."""

    min: TokenCount
    max: TokenCount

    @property
    def mean(self) -> float:
        return (self.min + self.max) / 2

    def text(self) -> str:
        return f"{self.min:,}–{self.max:,}"


TokenLength = TokenCount | TokenRange
"""A token length: fixed (an integer) or spread evenly ({min, max})."""


def mean_length(length: TokenLength) -> float:
    return float(length) if isinstance(length, int) else length.mean


def length_text(length: TokenLength) -> str:
    return f"{length:,}" if isinstance(length, int) else length.text()


class Workload(Strict):
    """A synthetic set (generated from `seed`: `prompts`, `max_tokens` required) or a
    replay of captured requests (`file`, `sha256`; each request carries its own sampling
    and stop rule). A synthetic set states its token lengths (`prompt_tokens`,
    `output_tokens`): the latency model, the plan and `specpair bench` use them."""

    name: Slug
    kind: Literal["short-homogeneous", "long-diverse", "replay"]
    prompts: Annotated[int, Field(ge=1, le=100_000)] | None = None
    max_tokens: Annotated[int, Field(ge=1, le=65_536)] | None = None
    file: LocalPath | None = Field(
        default=None, description="replay: JSONL of OpenAI chat or completion requests, "
                                  "relative to the runbook's folder")
    sha256: Sha256 | None = Field(default=None, description="replay: the file's sha256")
    seed: NonNegativeInt = 0
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    prompt_tokens: TokenLength | None = Field(
        default=None, description="synthetic: tokens per prompt, fixed or {min, max} (each "
        "request's drawn evenly from the seed); bench pads its prompts to about this length "
        "(4 characters per token). Unset: the generated prompts' own length (about 12 "
        "tokens), and every figure says it assumed that")
    output_tokens: TokenLength | None = Field(
        default=None, description="synthetic: tokens each request generates, fixed or {min, "
        "max}, at most max_tokens; bench sends each request's as its max_tokens. Unset: "
        "max_tokens, and every figure says it assumed that")


class Waiver(Strict):
    rule: Annotated[str, StringConstraints(pattern=r"^SP\d{3}$")]
    reason: Annotated[str, StringConstraints(min_length=10, max_length=1000)]


class GeometryOverrides(Strict):
    target: GeometryOverride = GeometryOverride()
    draft: GeometryOverride = GeometryOverride()


class Runbook(Strict):
    """One target/draft pair, deployed on one engine version."""

    pair: Pair
    engine: Engine
    target: Artifact
    draft: Draft | None = Field(default=None, description="absent only for NGRAM")
    speculation: Speculation
    deployment: Deployment
    geometry: GeometryOverrides = GeometryOverrides()
    acceptance: Acceptance
    staging: Staging = Staging()
    kubernetes: Kubernetes = Kubernetes()
    alerts: AlertWindows = AlertWindows()
    canary: Canary = Canary()
    codesign: Codesign = Codesign()
    workloads: list[Workload] = Field(default_factory=lambda: [
        Workload(name="short-homogeneous", kind="short-homogeneous", prompts=200,
                 max_tokens=64, seed=1),
        Workload(name="long-diverse", kind="long-diverse", prompts=100, max_tokens=1024,
                 seed=2)])
    waivers: list[Waiver] = Field(default_factory=list)


__all__ = ["CommitSha", "Runbook", "TokenLength", "TokenRange"]
