"""`vllm serve` for vLLM 0.33.0 with a `--speculative-config` JSON (vllm 0.33.0:
`vllm/engine/arg_utils.py`, `vllm/config/speculative.py::SpeculativeConfig`).

SpeculativeConfig forbids unknown keys, so the JSON is built only from `SPEC_CONFIG_KEYS`,
the 0.33.0 field names we use (the engines session checks them against the real class).
There is no `draft_revision`: the draft's revision is `revision` inside the JSON, while
`--revision` pins the target.
"""

from __future__ import annotations

import json
from typing import Any

from specpair.engines.engine_lists import refused_quantization
from specpair.engines.launch_model import EnvRef, Launch, Preflights
from specpair.engines.pair_input import EngineInput
from specpair.engines.profile import EngineProfile
from specpair.engines.vllm_0_33_0 import schedule
from specpair.engines.vllm_0_33_0.args import ServerArgs, server_args
from specpair.engines.vllm_0_33_0.facts import PROFILE
from specpair.model.common import KVDtype, Method
from specpair.model.geometry import Geometry

ENGINE = PROFILE.label
DEFAULT_DRAFT_SAMPLE_METHOD = "greedy"  # SpeculativeConfig.draft_sample_method

SPEC_CONFIG_KEYS = frozenset({
    "method", "model", "num_speculative_tokens", "revision", "draft_tensor_parallel_size",
    "kv_cache_dtype", "quantization", "prompt_lookup_max", "prompt_lookup_min",
    "max_model_len", "use_heterogeneous_vocab", "draft_sample_method",
    "use_local_argmax_reduction", schedule.CONFIG_KEY})
# vllm/model_executor/layers/quantization/__init__.py QuantizationMethods (0.33.0)
QUANTIZATION = ("awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4",
                "modelopt_mxfp8", "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin",
                "awq_marlin", "humming", "compressed-tensors", "experts_int8", "quark",
                "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8",
                "online", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel",
                "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8")
KV_DTYPE = {KVDtype.AUTO: "auto", KVDtype.BF16: "bfloat16", KVDtype.FP16: "float16",
            KVDtype.FP8_E4M3: "fp8_e4m3", KVDtype.FP8_E5M2: "fp8_e5m2"}
DTYPE = {"auto": "auto", "bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


class Launcher:
    """`vllm serve` as vLLM 0.33.0 takes it. Another release of vLLM whose reviewed facts
    (`facts.DIFFERENCES` of its package) differ here subclasses it and overrides the method
    of each difference, nothing else (vllm_0_32_0/launch.py)."""

    server_args = staticmethod(server_args)
    """The release's resolved server arguments (a later release passes its own defaults)."""
    quantization: tuple[str, ...] = QUANTIZATION

    def __init__(self, profile: EngineProfile) -> None:
        self.profile = profile
        self.engine = profile.label

    def launch_args(self, pair: EngineInput, speculate: bool) -> ServerArgs:
        """The server arguments the command renders (the same with or without the draft)."""
        return self.server_args(pair, pair.gpu_spec)

    def schedule_refusal(self, pair: EngineInput) -> str | None:
        """Why this release would drop the pair's speculation schedule (schedule.py)."""
        return schedule.refusal(pair)

    def mismatched_float_kv_cache(self, checks: Preflights, kv_float: str, model_dtype: str
                                  ) -> None:
        """An explicit float16/bfloat16 KV dtype other than the model's dtype (the served
        dtype, as resolve() puts it in the geometry):
        VllmConfig._reject_mismatched_float_kv_cache refuses it."""
        checks.need(False, "deployment.kv_cache_dtype",
                    f'kv_cache_dtype="{kv_float}" is incompatible with dtype="{model_dtype}"',
                    "use kv_cache_dtype: auto (or the model's dtype)")


    def speculative_config(self, pair: EngineInput, args: ServerArgs | None = None
                           ) -> dict[str, Any]:
        rb = pair.runbook
        spec = rb.speculation
        k = (args or self.server_args(pair, pair.gpu_spec)).num_speculative_tokens
        assert k is not None, "validated by rules.check_runbook"
        config: dict[str, Any] = {"method": self.profile.method_names[spec.method],
                                  "num_speculative_tokens": k}
        if rb.draft is not None and not rb.draft.bundled:
            config["model"] = rb.draft.path or rb.draft.repo
            if rb.draft.repo is not None and rb.draft.revision:
                config["revision"] = rb.draft.revision
            if rb.draft.quantization:
                config["quantization"] = rb.draft.quantization
        if rb.deployment.parallel.draft_tensor is not None:
            config["draft_tensor_parallel_size"] = rb.deployment.parallel.draft_tensor
        if rb.deployment.draft_kv_cache_dtype is not None:
            config["kv_cache_dtype"] = KV_DTYPE[rb.deployment.draft_kv_cache_dtype]
        if spec.method is Method.NGRAM:
            config["prompt_lookup_max"] = spec.ngram_max_match or 5
            config["prompt_lookup_min"] = spec.ngram_min_match or spec.ngram_max_match or 5
        if spec.heterogeneous_vocab:
            config["use_heterogeneous_vocab"] = True
        if spec.heterogeneous_vocab or spec.draft_sample_method is not None:
            # spelled out in this mode: its one sampling limit is visible in the command
            config["draft_sample_method"] = spec.draft_sample_method or DEFAULT_DRAFT_SAMPLE_METHOD
        if spec.local_argmax_reduction:
            config["use_local_argmax_reduction"] = True
        unknown = set(config) - SPEC_CONFIG_KEYS
        assert not unknown, f"speculative-config keys outside {self.engine}'s fields: {unknown}"
        return config


    def _model_args(self, pair: EngineInput, checks: Preflights) -> list[str | EnvRef]:
        """The command up to the target's flags (checkpoint, dtype, remote code,
        quantization), checking the quantizations and an explicit float KV dtype."""
        rb = pair.runbook
        target = rb.target
        argv: list[str | EnvRef] = ["vllm", "serve", target.path or target.repo or ""]
        if target.repo is not None and target.revision:
            argv += ["--revision", target.revision]
        argv += ["--dtype", DTYPE[target.dtype.value]]
        if target.trust_remote_code or (rb.draft is not None and rb.draft.trust_remote_code):
            argv.append("--trust-remote-code")
        for role, art in (("target", target), ("draft", rb.draft)):
            if art is not None and art.quantization:
                checks.need(art.quantization in self.quantization, f"{role}.quantization",
                            f"quantization {art.quantization!r} is not one of vLLM's methods "
                            "(ModelConfig refuses it)",
                            "use one of: " + ", ".join(self.quantization))
        for role, artifact in pair.checkpoints():
            refused = refused_quantization(self.engine, artifact.geometry)
            checks.need(refused is None, role, refused or "",
                        "serve a checkpoint in a format the release accepts")
        kv_float = {KVDtype.BF16: "bfloat16", KVDtype.FP16: "float16"}.get(
            rb.deployment.kv_cache_dtype)
        model_dtype = pair.target.geometry.dtype
        if kv_float is not None and kv_float != model_dtype:
            self.mismatched_float_kv_cache(checks, kv_float, model_dtype)
        if target.quantization:
            argv += ["--quantization", target.quantization]
        return argv

    def build(self, pair: EngineInput, speculate: bool = True) -> Launch:
        """`vllm serve` for the pair, with the draft or (`speculate` false) as its
        baseline, and the pre-flight findings of what this release refuses."""
        rb = pair.runbook
        dep = rb.deployment
        spec = rb.speculation
        par = dep.parallel
        checks = Preflights(self.engine)
        need = checks.need
        args = self.launch_args(pair, speculate)

        argv = self._model_args(pair, checks)
        argv += ["--tensor-parallel-size", str(par.tensor), "--pipeline-parallel-size",
                 str(par.pipeline), "--data-parallel-size", str(par.data)]
        if par.expert > 1:
            argv.append("--enable-expert-parallel")
        if args.kv_cache_memory_bytes is not None:
            argv += ["--kv-cache-memory-bytes", str(args.kv_cache_memory_bytes)]
        else:
            argv += ["--gpu-memory-utilization", f"{args.gpu_memory_utilization:g}"]
        argv += ["--max-model-len", str(dep.context_length),
                 "--kv-cache-dtype", KV_DTYPE[dep.kv_cache_dtype],
                 "--block-size", str(args.block_size),
                 "--max-num-seqs", str(args.max_num_seqs)]
        if args.enforce_eager:
            argv.append("--enforce-eager")
        if not dep.hybrid_kv_pools:
            argv.append("--disable-hybrid-kv-cache-manager")
        if speculate:
            config = self.speculative_config(pair, args)
            schedule.render(pair, config, checks, self.schedule_refusal(pair))
            argv += ["--speculative-config",
                     json.dumps(config, sort_keys=True, separators=(",", ":")),
                     # per-request acceptance for the measurement protocol (final usage chunk)
                     "--per-request-spec-decode-metrics", "summary"]
        argv += ["--host", dep.host, "--port", str(self.profile.port(dep.port))]

        need(spec.topk == 1, "speculation.topk", "speculation is a single chain (no EAGLE tree)",
             "set topk: 1")
        need(rb.staging.mode != "engine-overlap", "staging.mode",
             "has no overlapped weight loading", "use parallel-prestage or engine-prefetch")
        need(self.profile.draft_tensor_allowed(par.draft_tensor, par.tensor),
             "deployment.parallel.draft_tensor",
             f"draft_tensor_parallel_size must be 1 or the target's {par.tensor}",
             f"use 1 or {par.tensor}")
        linear = pair.target.geometry.linear_attention
        need(linear is None or linear.kind == "gdn", "target",
             "specpair does not model vLLM's KV layout for this linear-attention hybrid "
             "(only Gated DeltaNet)", "serve this pair with SGLang", severity="warning")
        if spec.method is Method.MTP and pair.draft is not None:
            _mtp_preflight(pair.draft.geometry, args, checks)
        env = {"VLLM_NO_USAGE_STATS": "1"}
        if spec.heterogeneous_vocab:
            env.update(self.heterogeneous_vocab_preflight(pair, checks))
        node_env: dict[str, str] = {}
        if dep.nodes > 1:
            argv += ["--nnodes", str(dep.nodes), "--node-rank", EnvRef("NODE_RANK"),
                     "--master-addr", EnvRef("MASTER_ADDR")]
            node_env = {"NODE_RANK": "rank of this node, 0 to nodes - 1",
                        "MASTER_ADDR": "address of node 0"}
        # ranks > 0 only run the multiproc executor; without --headless they would start an
        # API server of their own (vllm/entrypoints/cli/serve.py: run_headless)
        follower = ["--headless"] if dep.nodes > 1 else []
        return Launch(engine=self.engine, argv=argv, node_env=node_env, preflight=checks,
                      env=env, health_path="/health", follower_argv=follower,
                      port=self.profile.port(dep.port))


    def heterogeneous_vocab_preflight(self, pair: EngineInput, checks: Preflights
                                      ) -> dict[str, str]:
        """The restrictions of `use_heterogeneous_vocab` (Token-Level Intersection);
        returns the environment the mode needs.

        Each rule is the engine's: `SpeculativeConfig._verify_args` (vllm/config/speculative.py)
        raises for the first three while building the config; the mode forces the V1 model
        runner (`VllmConfig._get_v2_model_runner_unsupported_features`, vllm/config/vllm.py:
        "heterogeneous-vocabulary draft models"), whose `DraftModelProposer`
        (vllm/v1/spec_decode/draft_model.py, `_raise_if_draft_tp_mismatch`) needs the draft's
        TP to equal the target's. Requests' own sampling is not restricted: the draft proposal
        is an argmax and the rejection sampler treats it as one-hot, which stays lossless at
        any request temperature (vllm/v1/sample/rejection_sampler.py, no-draft-probs path).
        """
        rb = pair.runbook
        spec = rb.speculation
        par = rb.deployment.parallel
        need = checks.need
        need(spec.method is Method.STANDALONE, "speculation.heterogeneous_vocab",
             f"use_heterogeneous_vocab only works with method='draft_model' (STANDALONE), not "
             f"{self.profile.method_names.get(spec.method, spec.method.value)!r}",
             "use method: STANDALONE with a draft checkpoint, or remove heterogeneous_vocab")
        need(spec.draft_sample_method in (None, "greedy"), "speculation.draft_sample_method",
             "use_heterogeneous_vocab currently only supports greedy draft sampling "
             f"(draft_sample_method {spec.draft_sample_method!r})",
             "set draft_sample_method: greedy (request temperature is unaffected)")
        need(not spec.local_argmax_reduction, "speculation.local_argmax_reduction",
             "use_heterogeneous_vocab is not compatible with use_local_argmax_reduction: the "
             "token-level intersection masks the full draft logits",
             "remove local_argmax_reduction")
        need(par.draft_tensor in (None, par.tensor), "deployment.parallel.draft_tensor",
             f"the mode runs on the V1 model runner, whose draft_model proposer needs the draft "
             f"TP equal to the target's ({par.tensor}), not {par.draft_tensor}",
             f"set draft_tensor: {par.tensor} or leave it unset")
        need(rb.draft is not None and not rb.draft.bundled, "draft",
             "the mode loads the draft's own tokenizer from the draft checkpoint",
             "name a separate draft checkpoint (repo or path)")
        # Model Runner V2 has no token mapping: vLLM falls back to V1 with a warning, and
        # refuses to start if the environment forces VLLM_USE_V2_MODEL_RUNNER=1. Pin the
        # runner the mode needs, so an inherited environment cannot break the start.
        return {"VLLM_USE_V2_MODEL_RUNNER": "0"}


def _mtp_preflight(draft: Geometry, args: ServerArgs, checks: Preflights) -> None:
    """K against the draft's MTP layers: a multiple of them, and above them a warning
    (the same layers re-run)."""
    n = draft.num_nextn_predict_layers or 1
    k = args.num_speculative_tokens
    assert k is not None, "validated by rules.check_runbook"
    checks.need(k <= n or k % n == 0, "speculation.num_speculative_tokens",
                f"num_speculative_tokens {k} must be divisible by n_predict {n}",
                f"use a multiple of {n}")
    checks.need(k <= n, "speculation.num_speculative_tokens",
                f"K = {k} re-runs the same {n} MTP layer(s), which lowers acceptance",
                f"use {n} unless measured otherwise", severity="warning")


LAUNCHER = Launcher(PROFILE)
speculative_config = LAUNCHER.speculative_config
build = LAUNCHER.build
heterogeneous_vocab_preflight = LAUNCHER.heterogeneous_vocab_preflight
