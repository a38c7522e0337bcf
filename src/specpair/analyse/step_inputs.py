"""What the step model is fed for one pair: both forwards, the draft's shape, the context
while decoding, the hardware and the bands of its calibration pool.

Below both the latency model (latency.py) and the fit of a pair's own bench records
(calibrate.py), which each build on these inputs: the fit refines the parameters that the
latency model then reads, so neither imports the other's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from pydantic import Field

from specpair.analyse import calibrated_params, point_prediction
from specpair.analyse.step_params import StepParams
from specpair.analyse.stepmodel import (
    Architecture,
    Forward,
    Hardware,
    Shape,
    drafter_family,
    shape_for,
)
from specpair.bench.workloads import CHARS_PER_TOKEN, generate
from specpair.engines.pair_input import ResolvedArtifact
from specpair.model.budget import Budget
from specpair.model.common import Method, Strict
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry
from specpair.model.memo import value_memo
from specpair.model.runbook import Workload, length_text, mean_length
from specpair.model.step_refusals import NotModelled, deployment_refusal
from specpair.resolve.pair import ResolvedPair

FP8_DTYPES = ("F8_E4M3", "F8_E5M2", "F8_E4M3FN", "FP8")


class Parameters(Strict):
    values: StepParams
    source: str = Field(description="where the values come from")


def draft_shape(pair: ResolvedPair) -> Shape:
    spec = pair.runbook.speculation
    return shape_for(spec.method.value, spec.num_speculative_tokens,
                                 spec.block_size, spec.num_steps, spec.topk,
                                 spec.num_draft_tokens)


def _is_fp8(art: ResolvedArtifact) -> bool:
    by_dtype = art.weights.params_by_dtype
    fp8 = sum(n for d, n in by_dtype.items() if d.upper() in FP8_DTYPES)
    return fp8 * 2 > sum(by_dtype.values())


def architecture(art: ResolvedArtifact, weight_bytes: int, active_params: int) -> Architecture:
    """A resolved artifact as the step model's model description (the same path the
    calibration points take): dense weights always read, routed experts by coverage.

    With the expert layout in the geometry the routed part is exact (E experts of known
    size, top-k); without it a MoE falls back to its active fraction of all weights."""
    return _architecture(art.geometry, art.weights.total_params or 1, weight_bytes,
                         active_params, _is_fp8(art))


@value_memo  # of what `architecture` reads of the artifact; asked for every candidate
def _architecture(g: Geometry, total: int, weight_bytes: int, active_params: int,
                  fp8: bool) -> Architecture:
    moe = g.moe
    mla = g.attention == "mla" and g.kv_lora_rank
    routed, routed_bpp, active = 0.0, 0.0, float(active_params)
    if moe is not None and _expert_bytes_refusal(g, total, weight_bytes) is None:
        routed = float(moe.routed_params)
        routed_bpp = moe.bytes_per_param or 0.0  # 0: the checkpoint's average, as the rest
        if routed_bpp and active_params >= total:
            # no active count declared, and the lock's count is storage elements or bytes /
            # the config dtype: the dense part's parameters from its bytes (in the experts'
            # format for FP8 checkpoints, whose linears are all FP8; else the config dtype),
            # plus the experts a token is routed to. It sets the FLOPs only.
            dense_bpp = routed_bpp if moe.weight_format == "fp8" else _DTYPE_BYTES.get(
                g.dtype, 2.0)
            active = (weight_bytes - routed * routed_bpp) / dense_bpp \
                + routed * moe.active_experts / moe.experts
    return Architecture(
        params=float(total), bytes_per_param=weight_bytes / total,
        layers=g.num_hidden_layers, attention_layers=g.full_attention_layers,
        heads=g.num_attention_heads, kv_heads=g.num_key_value_heads, head_dim=g.head_dim,
        v_head_dim=g.v_head_dim, kv_bytes_per_token=0.0,
        active_params=active if active < total or routed_bpp else None,
        experts=moe.experts if routed and moe is not None else 0,
        top_k=moe.active_experts if routed and moe is not None else 0,
        routed_params=routed, routed_bytes_per_param=routed_bpp,
        attention_per_head=2 * (g.kv_lora_rank or 0) + (g.qk_rope_head_dim or 0) if mla
        else None,
        fp8=fp8, hidden=g.hidden_size)


EXPERT_BYTES = "routed experts' weight bytes"
_DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}


def _expert_bytes_refusal(g: Geometry, total: int, weight_bytes: int) -> str | None:
    """Why a MoE's routed experts cannot be placed in its checkpoint's bytes, or None.

    The step model reads the dense part every step and of the routed experts only the share
    the step's tokens touch, so it must know which bytes are the experts'. With the experts'
    format read from the config (`config_geometry.expert_format`) they are routed params × that
    format's bytes; without one, the checkpoint's average bytes per parameter, which holds
    only where the lock's parameter count covers the experts. A packed format (MXFP4 in U8,
    INT4 in I32) counts storage elements, not parameters, and a count declared as bytes /
    the config dtype counts a 4-bit checkpoint as a quarter of itself: then the experts
    alone would outweigh the checkpoint, and any split is a guess."""
    moe = g.moe
    if moe is None:
        return None
    fmt = moe.bytes_per_param
    if fmt is not None:
        if moe.routed_params * fmt < weight_bytes:
            return None
        return (f"{moe.routed_params:,} routed-expert parameters in {moe.weight_format} "
                f"({fmt:g} bytes each) outweigh the checkpoint's {weight_bytes:,} bytes: the "
                "lock's weight bytes or the config's expert layout is wrong")
    if moe.unread_quantization is not None:
        return (f"the config's quantization_config ({moe.unread_quantization}) stores the "
                "routed experts in a format the step model does not read (it reads fp8, "
                "mxfp4 and ModelOpt NVFP4 experts): which of the checkpoint's bytes are "
                "the experts' is unknown, and the checkpoint's average bytes per parameter "
                "would misplace them")
    if moe.routed_params < total:
        return None
    return (f"the config's {moe.routed_params:,} routed-expert parameters exceed the lock's "
            f"{total:,} parameters, and the experts' weight format is not one the step "
            "model reads from quantization_config (fp8, mxfp4, ModelOpt NVFP4): which of "
            "the checkpoint's bytes are the experts' is unknown")


def forwards(pair: ResolvedPair, budget: Budget) -> tuple[Forward, Forward | None]:
    dep = pair.runbook.deployment
    par = dep.parallel
    spec_scn = budget.speculative or budget.baseline
    target = architecture(pair.target, pair.target_own_weight_bytes,
                          pair.target_own_active_params).forward(
        par.tensor, par.expert, par.pipeline, kv_per_rank=spec_scn.cell_target)
    if pair.draft is None or pair.runbook.speculation.method is Method.NGRAM:
        return target, None
    d_w = pair.draft.weights
    d_tp = par.draft_tensor or par.tensor
    draft = architecture(pair.draft, d_w.weight_bytes,
                         d_w.active_params or d_w.total_params).forward(
        d_tp, kv_per_rank=spec_scn.cell_draft)
    return target, draft


@cache  # a frozen Workload hashes by value; its prompts are generated, not read
def workload_lengths(w: Workload) -> tuple[float, float, str] | None:
    """Mean prompt and output tokens of one synthetic workload, and the words naming them
    and what was assumed where the workload does not state them; None for a replay (its
    file is read by `specpair bench` only)."""
    if w.kind == "replay" or w.max_tokens is None:
        return None
    if w.prompt_tokens is not None:
        prompt, p_text = mean_length(w.prompt_tokens), f"{length_text(w.prompt_tokens)} prompt"
    else:
        prompts = generate(w)
        prompt = sum(len(r.prompt) for r in prompts) / len(prompts) / CHARS_PER_TOKEN
        p_text = (f"≈{prompt:.0f} prompt (assumed: the generated prompts' characters / "
                  f"{CHARS_PER_TOKEN}; no prompt_tokens)")
    if w.output_tokens is not None:
        out, o_text = mean_length(w.output_tokens), f"{length_text(w.output_tokens)} output"
    else:
        out, o_text = float(w.max_tokens), (f"{w.max_tokens:,} output (assumed: max_tokens; "
                                            "no output_tokens)")
    return prompt, out, f"{w.name} at {p_text} + {o_text} tokens"


def workload_context(w: Workload) -> float | None:
    """Mean prompt tokens plus half the output of one synthetic workload (a sequence is
    halfway through its answer on average while decoding); None for a replay."""
    lengths = workload_lengths(w)
    return None if lengths is None else lengths[0] + lengths[1] / 2


def expected_context(pair: ResolvedPair) -> tuple[int, str]:
    """Tokens in context per sequence while decoding: the declared mean, else the mean over
    the runbook's workloads of (prompt + half the output)."""
    dep = pair.runbook.deployment
    return _expected_context(dep.mean_context, dep.context_length,
                             tuple(pair.runbook.workloads))


@value_memo  # of the three runbook values it reads; asked several times per candidate
def _expected_context(mean_context: int | None, context_length: int,
                      workloads: tuple[Workload, ...]) -> tuple[int, str]:
    if mean_context is not None:
        return min(mean_context, context_length), "declared (deployment.mean_context)"
    synthetic = [w for w in workloads if workload_context(w) is not None]
    per_workload = [c for w in synthetic if (c := workload_context(w)) is not None]
    if not per_workload:  # rules.check_runbook asks such runbooks for mean_context
        return context_length, "the context length (no synthetic workload to average)"
    mean = max(1, round(sum(per_workload) / len(per_workload)))
    return min(mean, context_length), (
        "mean over the runbook's workloads of prompt + half the output: " + "; ".join(
            lengths[2] for w in synthetic if (lengths := workload_lengths(w)) is not None))


@dataclass(frozen=True)
class _Setup:
    target: Forward
    draft: Forward | None
    shape: Shape
    context: int
    hw: Hardware
    params: StepParams
    speedup_band: calibrated_params.Interval
    throughput_band: calibrated_params.Interval

    def __hash__(self) -> int:
        """By value, computed once: the latency-point memo hashes the setup per point. (A
        copy in another process may carry a stale hash; a memo then misses, as a lookup
        always compares by `==` as well.)"""
        known = self.__dict__.get("_hash")
        if known is None:
            known = hash((self.target, self.draft, self.shape, self.context, self.hw,
                          self.params, self.speedup_band, self.throughput_band))
            object.__setattr__(self, "_hash", known)
        return known


def bands(pair: ResolvedPair) -> tuple[calibrated_params.Interval, calibrated_params.Interval]:
    """The cross-validated speedup and throughput bands of the pair's GPU family ×
    engine × drafter family."""
    engine = pair.runbook.engine.name.value
    family = pair.gpu_spec.family
    drafter = drafter_family(pair.runbook.speculation.method.value)
    return (calibrated_params.interval(family, engine, drafter, "speedup"),
            calibrated_params.interval(family, engine, drafter, "throughput"))


def published_parameters(pair: ResolvedPair) -> Parameters:
    """The published fit of the pair's GPU family, engine and method."""
    chosen = calibrated_params.params_for(pair.gpu_spec.family, pair.runbook.engine.name.value,
                                          pair.runbook.speculation.method.value)
    return Parameters(values=chosen.params, source=chosen.provenance)


def unmodelled(pair: ResolvedPair) -> NotModelled | None:
    """Why the step model does not represent the pair's deployment, or None where it does
    (`stepmodel.deployment_refusal`, the check the calibration points get)."""
    dep = pair.runbook.deployment
    par = dep.parallel
    refusal = deployment_refusal(par.tensor, par.pipeline, par.expert, dep.gpus_per_node)
    if refusal is not None:
        return refusal
    models = [("target", pair.target, pair.target_own_weight_bytes)]
    if pair.draft is not None and pair.runbook.speculation.method is not Method.NGRAM:
        models.append(("draft", pair.draft, pair.draft.weights.weight_bytes))
    for role, art, weight_bytes in models:
        why = _expert_bytes_refusal(art.geometry, art.weights.total_params or 1, weight_bytes)
        if why is not None:
            return NotModelled(EXPERT_BYTES, f"{role}: {why}")
    return None


def not_modelled_text(refusal: NotModelled) -> str:
    """The one wording every output uses where a modelled latency number would stand."""
    return f"not modelled: {refusal.name} ({refusal.reason})"


NOT_MODELLED_HINT = ("the latency model covers model replicas within one node; plan such a "
                     "deployment from measurements of it (`specpair bench` against the "
                     "deployed pair)")


def refuse_unmodelled(pair: ResolvedPair) -> None:
    """A deployment the step model does not represent is refused by name, never given a
    number (`unmodelled`)."""
    refusal = unmodelled(pair)
    if refusal is None:
        return
    if refusal.name == EXPERT_BYTES:
        raise SpecpairError.single(pair.source_file, not_modelled_text(refusal),
                                   EXPERT_BYTES_HINT, field_path="target")
    raise SpecpairError.single(pair.source_file, not_modelled_text(refusal),
                               NOT_MODELLED_HINT, field_path="deployment.parallel")


EXPERT_BYTES_HINT = ("lock the artifact from the hub (`specpair lock`) or declare its "
                     "parameters as the checkpoint's logical parameter count "
                     "(`weights.params_by_dtype`); where the config's quantization "
                     "scheme stores the experts in a format not read (compressed-tensors, "
                     "AWQ, GPTQ, per-layer mixed precision), measure the pair "
                     "(`specpair bench`)")


def setup_with(pair: ResolvedPair, budget: Budget, params: StepParams) -> _Setup:
    refuse_unmodelled(pair)
    gpu = pair.gpu_spec
    target, draft = forwards(pair, budget)
    context, _ = expected_context(pair)
    speedup_band, throughput_band = bands(pair)
    return _Setup(target, draft, draft_shape(pair), context,
                  point_prediction.hardware_for(gpu),
                  params, speedup_band, throughput_band)
