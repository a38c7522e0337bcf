"""`sglang serve` for SGLang 0.5.23, every value explicit (sglang 0.5.23: the flags in
`srt/arg_groups/fields/*.py`, their defaults in `srt/arg_groups/*_hook.py`).

Nothing is left to an engine default that depends on something the engine may fail to
read: the block size of DFLASH/DSPARK (DSPARK silently uses gamma 7 when the draft config
cannot be read), the EAGLE (steps, topk, draft tokens) triple (chosen from the target
architecture otherwise), the memory fraction (a GPU-size heuristic), the running-request
limit (48 under speculation).
"""

from __future__ import annotations

from specpair.engines import engine_lists
from specpair.engines.engine_lists import refused_quantization
from specpair.engines.kv_arithmetic import kv_layers
from specpair.engines.launch_model import EnvRef, Launch, Preflights
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23 import schedule
from specpair.engines.sglang_0_5_23.args import (
    DEFAULTS,
    Defaults,
    ServerArgs,
    server_args,
    verify_width,
)
from specpair.engines.sglang_0_5_23.facts import PROFILE
from specpair.model.common import KVDtype, Method
from specpair.model.runbook import Artifact, Runbook, Speculation

LONGER_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"

# sglang/srt/arg_groups/choices.py QUANTIZATION_CHOICES (the --quantization and
# --speculative-draft-model-quantization choices); anything else is a parser error
QUANTIZATION = ("awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes",
                "gguf", "modelopt", "modelopt_fp8", "modelopt_fp4", "nvfp4_online",
                "modelopt_mixed", "petit_nvfp4", "w8a8_int8", "w8a8_fp8", "moe_wna16",
                "w4afp8", "mxfp4", "auto-round", "auto-round-int8", "compressed-tensors",
                "modelslim", "mxfp_w4a8", "quark", "quark_int4fp8_moe", "quark_mxfp4",
                "mlx_q4", "mlx_q8", "unquant", "humming")

KV_DTYPE = {KVDtype.AUTO: "auto", KVDtype.BF16: "bf16", KVDtype.FP8_E4M3: "fp8_e4m3",
            KVDtype.FP8_E5M2: "fp8_e5m2"}
DTYPE = {"auto": "auto", "bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def _source(art: Artifact) -> tuple[str, str | None]:
    if art.path is not None:
        return art.path, None
    assert art.repo is not None
    return art.repo, art.revision


def build(pair: EngineInput, speculate: bool = True, defaults: Defaults = DEFAULTS,
          quantization: tuple[str, ...] = QUANTIZATION) -> Launch:
    """`sglang serve` for the pair, with the draft or (`speculate` false) as its baseline,
    and the pre-flight findings of what this release refuses."""
    rb = pair.runbook
    dep = rb.deployment
    spec = rb.speculation
    par = dep.parallel
    checks = Preflights(defaults.engine)
    need = checks.need
    args = server_args(pair, pair.gpu_spec, defaults)

    argv = _model_args(rb, checks, quantization)
    for role, artifact in pair.checkpoints():
        refused = refused_quantization(defaults.engine, artifact.geometry)
        need(refused is None, role, refused or "",
             "serve a checkpoint in a format the release accepts")
    _refuse_vllm_options(spec, checks)
    verify = verify_width(spec)
    adaptive, files = schedule.render(pair, checks, schedule.refusal(pair)) if speculate \
        else ([], {})
    if speculate:
        argv += _speculative_args(pair, checks, verify, adaptive)

    argv += ["--tp-size", str(par.tensor), "--ep-size", str(par.expert),
             "--dp-size", str(par.data), "--pp-size", str(par.pipeline)]
    argv += ["--mem-fraction-static", f"{args.mem_fraction_static:g}",
             "--context-length", str(dep.context_length)]
    need(dep.kv_cache_dtype in KV_DTYPE, "deployment.kv_cache_dtype",
         f"--kv-cache-dtype has no {dep.kv_cache_dtype.value}",
         "use auto, bf16, fp8_e4m3 or fp8_e5m2")
    argv += ["--kv-cache-dtype", KV_DTYPE.get(dep.kv_cache_dtype, "auto"),
             "--page-size", str(args.page_size),
             "--max-running-requests", str(args.max_running_requests)]
    # the baseline keeps the speculative server's limit so both serve the same load
    if not dep.hybrid_kv_pools:
        argv.append("--disable-hybrid-swa-memory")
    argv += _staging_args(rb.staging.mode, checks)
    if pair.target.geometry.linear_attention is not None:
        argv += _linear_state_args(pair, args, speculate, verify, checks)
    _draft_preflight(pair, checks)

    if not args.cuda_graphs:
        argv += ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill",
                 "disabled"]
    argv += ["--host", dep.host, "--port", str(PROFILE.port(dep.port)), "--enable-metrics"]
    node_env: dict[str, str] = {}
    if dep.nodes > 1:
        argv += ["--nnodes", str(dep.nodes), "--node-rank", EnvRef("NODE_RANK"),
                 "--dist-init-addr", EnvRef("DIST_INIT_ADDR")]
        node_env = {"NODE_RANK": "rank of this node, 0 to nodes - 1",
                    "DIST_INIT_ADDR": "host:port of node 0, e.g. 10.0.0.1:25000"}
    env = _draft_context_env(pair, speculate)
    # /health generates one token (503 while starting or wedged); /ready only says whether
    # new requests are taken (sglang/srt/entrypoints/http_server.py)
    return Launch(engine=defaults.engine, argv=argv, node_env=node_env, env=env,
                  preflight=checks, health_path="/health", ready_path="/ready",
                  port=PROFILE.port(dep.port), files=files)


def _model_args(rb: Runbook, checks: Preflights, quantization: tuple[str, ...]
                ) -> list[str | EnvRef]:
    """The command up to the target's flags (checkpoint, dtype, remote code,
    quantization); a quantization the parser does not know is refused."""
    model, revision = _source(rb.target)
    argv: list[str | EnvRef] = ["sglang", "serve", "--model-path", model]
    if revision:
        argv += ["--revision", revision]
    argv += ["--dtype", DTYPE[rb.target.dtype.value]]
    if rb.target.trust_remote_code or (rb.draft is not None and rb.draft.trust_remote_code):
        argv.append("--trust-remote-code")
    for role, art in (("target", rb.target), ("draft", rb.draft)):
        if art is not None and art.quantization:
            checks.need(art.quantization in quantization, f"{role}.quantization",
                        f"--quantization has no {art.quantization!r} (the parser refuses it)",
                        "use one of: " + ", ".join(quantization))
    if rb.target.quantization:
        argv += ["--quantization", rb.target.quantization]
    return argv


def _refuse_vllm_options(spec: Speculation, checks: Preflights) -> None:
    """vLLM's speculative-config options; SGLang 0.5.23 has no heterogeneous-vocabulary
    mode: STANDALONE refuses unequal vocab sizes and unequal token-to-id maps
    (StandaloneWorkerV2._validate_vocab_compatibility, srt/speculative/standalone_worker_v2.py)."""
    for key, used in (("heterogeneous_vocab", spec.heterogeneous_vocab),
                      ("draft_sample_method", spec.draft_sample_method is not None),
                      ("local_argmax_reduction", spec.local_argmax_reduction)):
        checks.need(not used, f"speculation.{key}",
                    f"has no {key} option (it is vLLM's speculative-config; SGLang has no "
                    "heterogeneous-vocabulary mode and requires the draft to share the target's "
                    "vocabulary)", f"remove {key}, or serve the pair with vllm 0.33.0")


def _speculative_args(pair: EngineInput, checks: Preflights, verify: int, adaptive: list[str]
                      ) -> list[str | EnvRef]:
    """The speculative server's flags: algorithm, draft checkpoint, the method's draft
    shape (block size, draft tokens or the EAGLE triple) and the draft's KV dtype."""
    rb = pair.runbook
    spec = rb.speculation
    dep = rb.deployment
    argv: list[str | EnvRef] = ["--speculative-algorithm", PROFILE.method_names[spec.method]]
    if rb.draft is not None:
        draft_src = rb.target if rb.draft.bundled else rb.draft
        d_model, d_revision = _source(draft_src)
        argv += ["--speculative-draft-model-path", d_model]
        if d_revision:
            argv += ["--speculative-draft-model-revision", d_revision]
        if rb.draft.quantization:
            argv += ["--speculative-draft-model-quantization", rb.draft.quantization]
    if spec.method is Method.DSPARK:
        argv += ["--speculative-dspark-block-size", str(spec.block_size)]
    elif spec.method is Method.DFLASH:
        argv += ["--speculative-dflash-block-size", str(spec.block_size)]
    elif spec.method is Method.NGRAM:
        argv += ["--speculative-num-draft-tokens", str(verify)]
    else:
        steps = spec.num_steps or spec.num_speculative_tokens
        width = verify
        if adaptive:  # sized for the largest candidate, which must be the steps
            steps = schedule.steps(pair)
            width = steps + 1
        argv += ["--speculative-num-steps", str(steps), "--speculative-eagle-topk",
                 str(spec.topk), "--speculative-num-draft-tokens", str(width), *adaptive]
    if dep.draft_kv_cache_dtype is not None:
        checks.need(dep.draft_kv_cache_dtype in KV_DTYPE, "deployment.draft_kv_cache_dtype",
                    f"--speculative-draft-kv-cache-dtype has no "
                    f"{dep.draft_kv_cache_dtype.value}", "use auto, bf16, fp8_e4m3 or fp8_e5m2")
        if dep.draft_kv_cache_dtype in KV_DTYPE:
            argv += ["--speculative-draft-kv-cache-dtype", KV_DTYPE[dep.draft_kv_cache_dtype]]
    return argv


def _staging_args(mode: str, checks: Preflights) -> list[str | EnvRef]:
    """Weights load serially in the engine (overlap is refused under speculation); the
    prefetch mode adds the checkpoint prefetch."""
    checks.need(mode != "engine-overlap", "staging.mode",
                "--startup-weight-load-mode overlap is rejected with any speculative algorithm "
                "('speculative decoding is not supported'), and only after the target weights "
                "have loaded", "use staging mode parallel-prestage or engine-prefetch")
    argv: list[str | EnvRef] = ["--startup-weight-load-mode", "serial"]
    if mode == "engine-prefetch":
        argv.append("--weight-loader-prefetch-checkpoints")
    return argv


def _linear_state_args(pair: EngineInput, args: ServerArgs, speculate: bool, verify: int,
                       checks: Preflights) -> list[str | EnvRef]:
    """A linear-attention hybrid's state-pool flags, spelled out as the budget assumes
    them (ReplaySSM ring, SSM dtype, state share, cache size, radix strategy)."""
    spec = pair.runbook.speculation
    ls = pair.runbook.deployment.linear_state
    argv: list[str | EnvRef] = []
    if ls.replay_spec and speculate:
        argv += ["--enable-linear-replayssm-spec", "--linear-replayssm-cache-len",
                 str(ls.replay_cache_len)]
        length = ls.replay_cache_len
        checks.need(length & (length - 1) == 0 and length >= 2 * verify,
                    "deployment.linear_state.replay_cache_len",
                    f"the KDA ReplaySSM ring must be a power of two ≥ 2 × verify width "
                    f"({2 * verify}); {length} fails when the pool is allocated, after the "
                    "weights load", f"set replay_cache_len to {_next_pow2(2 * verify)}")
        checks.need(spec.topk == 1, "speculation.topk", "ReplaySSM-spec needs a linear chain",
                    "use topk 1")
    if ls.ssm_dtype:
        argv += ["--mamba-ssm-dtype", ls.ssm_dtype]
    # the state share and the radix strategy as the budget assumes them, explicitly
    assert args.mamba_full_memory_ratio is not None
    argv += ["--mamba-full-memory-ratio", f"{args.mamba_full_memory_ratio:g}"]
    if ls.max_cache_size is not None:
        argv += ["--max-mamba-cache-size", str(ls.max_cache_size)]
    strategy = ls.radix_cache_strategy
    if strategy == "auto" and not ls.disable_radix_cache \
            and pair.target.geometry.architecture \
            in engine_lists.of(args.defaults.engine).extra_buffer:
        strategy = "extra_buffer"  # what `auto` resolves to with the overlap scheduler
    if strategy != "auto":
        argv += ["--mamba-radix-cache-strategy", strategy]
    if ls.disable_radix_cache:
        argv.append("--disable-radix-cache")
    return argv


def _draft_preflight(pair: EngineInput, checks: Preflights) -> None:
    """Drafts this release cannot load or split: speculators format, and a block
    drafter's pipeline and heads."""
    spec = pair.runbook.speculation
    par = pair.runbook.deployment.parallel
    if pair.draft is not None and pair.draft.geometry.verifier is not None:
        # a speculators-format draft (speculators_config) has no model_type: ModelConfig
        # loads the draft through transformers' AutoConfig, which needs one
        checks.need(False, "draft", "the draft is in speculators format, which SGLang cannot "
                    "load ('Unrecognized model … Should have a `model_type` key')",
                    "use the draft's SGLang/EAGLE checkpoint, or serve this pair with vLLM")
    if spec.method.is_block_drafter:
        checks.need(par.pipeline == 1, "deployment.parallel.pipeline",
                    f"{spec.method.value} needs pp_size 1 (DSPARK allows PP only on a PD "
                    "prefill server)", "set pipeline: 1")
    if pair.draft is not None and spec.method.is_block_drafter:
        draft = pair.draft.geometry
        checks.need(draft.num_attention_heads % par.tensor == 0, "deployment.parallel.tensor",
                    f"the draft's {draft.num_attention_heads} heads do not split over TP "
                    f"{par.tensor}", "use a TP size that divides the draft's heads")
        checks.need(kv_layers(draft) > 0, "draft", "the draft has no attention layers",
                    "check lock")


def _draft_context_env(pair: EngineInput, speculate: bool) -> dict[str, str]:
    """The environment that lets a separate draft run past its own context limit, up to
    the target's."""
    dep = pair.runbook.deployment
    env: dict[str, str] = {}
    if speculate and pair.draft is not None and not pair.draft.bundled and \
            pair.draft.geometry.max_position_embeddings < dep.context_length <= \
            pair.target.geometry.max_position_embeddings:
        # ModelConfig._derive_context_length builds the draft at the target's context
        # length and raises ("Target model's context_length (…) is greater than the derived
        # context_length (…)") unless this is set; the target's own limit is the gate's
        # SP402 (and the variable is not set past it), so the override only lets the
        # draft run at absolute target positions
        # (what that costs in acceptance is SP401's warning)
        env[LONGER_CONTEXT_ENV] = "1"
    return env


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()
