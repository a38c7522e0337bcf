"""`vllm serve` for vLLM 0.34.0: vLLM 0.33.0's command (`vllm_0_33_0/launch.py`) but for the
reviewed differences in `facts.DIFFERENCES`: the KV sizing mode (pinned bytes or the
extensible cache), the speculative-config keys (no use_heterogeneous_vocab), the
quantization methods, the method checked against the draft's declared speculator, no
Model Runner V1 (no VLLM_USE_V2_MODEL_RUNNER), the schedule without the V1 guard."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from specpair.engines.launch_model import Launch, Preflights
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0 import launch as v0_33_0
from specpair.engines.vllm_0_34_0 import schedule
from specpair.engines.vllm_0_34_0.args import ServerArgs34, server_args
from specpair.engines.vllm_0_34_0.budget import pinned_kv_bytes
from specpair.engines.vllm_0_34_0.facts import DECLARED_SPECULATOR, PROFILE, STILL_HETEROGENEOUS
from specpair.model.common import Method

if TYPE_CHECKING:  # annotations only: resolve sits above the engine registry
    from specpair.engines.vllm_0_33_0.args import ServerArgs

__all__ = ["ENGINE", "LAUNCHER", "SPEC_CONFIG_KEYS", "Launcher", "build", "speculative_config"]

ENGINE = PROFILE.label
# 0.33.0's keys less the one 0.34.0 removed (config/speculative.py; SpeculativeConfig
# forbids unknown keys, config/utils.py:72)
SPEC_CONFIG_KEYS = v0_33_0.SPEC_CONFIG_KEYS - {"use_heterogeneous_vocab"}
# model_executor/layers/quantization/__init__.py:15 QuantizationMethods (0.34.0)
QUANTIZATION = tuple(q for q in v0_33_0.QUANTIZATION if q != "fp_quant") + (
    "w4afp8", "lut_b_moe", "mxfp4_hadamard32")


class Launcher(v0_33_0.Launcher):
    server_args = staticmethod(server_args)
    quantization = QUANTIZATION

    def launch_args(self, pair: EngineInput, speculate: bool) -> ServerArgs:
        """Pinned: the KV bytes the budget computes for this server (with or without the
        draft's weights), which the command passes as --kv-cache-memory-bytes."""
        args = self.server_args(pair, pair.gpu_spec)
        if args.kv_cache_sizing == "pinned" and args.kv_cache_memory_bytes is None:
            return replace(args, kv_cache_memory_bytes=pinned_kv_bytes(pair, speculate))
        return args

    def schedule_refusal(self, pair: EngineInput) -> str | None:
        """0.34.0 has no Model Runner V1 and no `_maybe_disable_dynamic_sd_for_v1`."""
        return schedule.refusal(pair)

    def speculative_config(self, pair: EngineInput, args: ServerArgs | None = None
                           ) -> dict[str, Any]:
        config = super().speculative_config(pair, args)
        # refused by heterogeneous_vocab_preflight; the key would fail the engine's parser
        config.pop("use_heterogeneous_vocab", None)
        unknown = set(config) - SPEC_CONFIG_KEYS
        assert not unknown, f"speculative-config keys outside {self.engine}'s fields: {unknown}"
        return config

    def heterogeneous_vocab_preflight(self, pair: EngineInput, checks: Preflights
                                      ) -> dict[str, str]:
        """0.34.0 removed the mode with Model Runner V1 (facts.DIFFERENCES): no key, no
        token mapping, and VLLM_USE_V2_MODEL_RUNNER=0 fails start-up
        (platforms/interface.py:1481-1491). Refused by name; no environment."""
        checks.need(False, "speculation.heterogeneous_vocab",
                    "no heterogeneous-vocabulary mode: this release removed "
                    "use_heterogeneous_vocab (Token-Level Intersection) with Model Runner V1 "
                    "(an unknown --speculative-config key, and VLLM_USE_V2_MODEL_RUNNER=0 "
                    f"fails start-up); {STILL_HETEROGENEOUS} still has it",
                    f"pin engine.version: {STILL_HETEROGENEOUS.split()[1]}, or use a draft "
                    "that shares the target's vocabulary")
        return {}

    def build(self, pair: EngineInput, speculate: bool = True) -> Launch:
        launch = super().build(pair, speculate)
        checks = launch.preflight
        assert isinstance(checks, Preflights)
        rb = pair.runbook
        dep = rb.deployment
        checks.need(dep.kv_cache_sizing == "pinned" or dep.kv_cache_memory_bytes is None,
                    "deployment.kv_cache_memory_bytes",
                    "kv_cache_memory_bytes turns the extensible KV cache off "
                    "(config/vllm.py:3203), so kv_cache_sizing: measured cannot hold",
                    "set kv_cache_sizing: pinned, or remove kv_cache_memory_bytes")
        args = self.launch_args(pair, speculate)
        if isinstance(args, ServerArgs34) and args.kv_cache_sizing == "pinned" \
                and dep.kv_cache_memory_bytes is None:
            checks.need(pinned_kv_bytes(pair, speculate) > 1, "deployment",
                        "nothing is left for the KV cache at gpu_memory_utilization "
                        f"{args.gpu_memory_utilization:g} after the weights and the assumed "
                        "engine memory (budget.md)",
                        "raise deployment.memory_fraction if the weights fit, else use more "
                        "tensor-parallel ranks or a larger GPU")
        if speculate:
            self.declared_speculator(pair, checks)
        return launch

    def declared_speculator(self, pair: EngineInput, checks: Preflights) -> None:
        """The configured method against the speculator the draft's architecture declares
        (`_resolve_checkpoint_config_class`, speculator_config.py:404-427), in the
        engine's words."""
        rb = pair.runbook
        if pair.draft is None or rb.speculation.method is Method.NGRAM:
            return
        architecture = pair.draft.geometry.architecture
        declared = DECLARED_SPECULATOR.get(architecture)
        requested = self.profile.method_names.get(rb.speculation.method)
        checks.need(declared is None or declared == requested, "speculation.method",
                    f"speculative_config requested method={requested!r}, but the draft model "
                    f"is a {declared!r} checkpoint (architectures=[{architecture!r}]) "
                    f"({self.engine} refuses it at start-up)",
                    f"use the method the draft declares ({declared}), or a draft checkpoint "
                    f"made for {requested}")


LAUNCHER = Launcher(PROFILE)
speculative_config = LAUNCHER.speculative_config
build = LAUNCHER.build
