"""An example pair's inputs for `specpair budget` without a runbook, built from its lock
and runbook: each artifact's geometry written out as the config.json that reads back as
it, its weight bytes as --target-bytes / --draft-bytes, and the runbook's fields as flags.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specpair.model.geometry import Geometry
from specpair.model.lock import ArtifactLock
from specpair.model.runbook import Runbook

QUANT = {"fp8": {"quant_method": "fp8", "weight_block_size": [128, 128]},
         "mxfp4": {"quant_method": "mxfp4"},
         "nvfp4": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}


def _layer_types(g: Geometry) -> list[str] | None:
    if g.layers is None or not (g.sliding_window_layers or g.chunked_attention_layers):
        return None
    names = {"full": "full_attention", "sliding": "sliding_attention",
             "chunked": "chunked_attention", "linear": "linear_attention"}
    return [names[layer.kind] for layer in g.layers]


def config_of(g: Geometry) -> dict[str, Any]:
    """A config.json whose geometry (`from_hf_config`) is `g`: the keys the engines read,
    in the spelling of `g`'s model type."""
    config: dict[str, Any] = {
        "architectures": [g.architecture], "torch_dtype": g.dtype,
        "hidden_size": g.hidden_size, "vocab_size": g.vocab_size,
        "max_position_embeddings": g.max_position_embeddings,
        "num_hidden_layers": g.num_hidden_layers,
        "num_attention_heads": g.num_attention_heads,
        "num_key_value_heads": g.num_key_value_heads}
    if g.model_type is not None:
        config["model_type"] = g.model_type
    if g.attention == "mla":
        assert g.kv_lora_rank is not None and g.qk_rope_head_dim is not None
        config.update(kv_lora_rank=g.kv_lora_rank, qk_rope_head_dim=g.qk_rope_head_dim,
                      qk_nope_head_dim=g.head_dim - g.qk_rope_head_dim,
                      v_head_dim=g.v_head_dim, q_lora_rank=None)
    else:
        config["head_dim"] = g.head_dim
    if g.num_nextn_predict_layers:
        config["num_nextn_predict_layers"] = g.num_nextn_predict_layers
    if g.moe is not None:
        config.update(n_routed_experts=g.moe.experts, num_experts_per_tok=g.moe.active_experts,
                      moe_intermediate_size=g.moe.expert_params // (3 * g.hidden_size),
                      first_k_dense_replace=g.num_hidden_layers - g.moe.moe_layers)
        if g.moe.weight_format is not None:
            config["quantization_config"] = QUANT[g.moe.weight_format]
    types = _layer_types(g)
    if types is not None:
        config["layer_types"] = types
    if g.sliding_window is not None:
        config["sliding_window"] = g.sliding_window
    if g.attention_chunk_size is not None:
        config["attention_chunk_size"] = g.attention_chunk_size
    linear = g.linear_attention
    if linear is not None:
        assert linear.kind == "kda" and g.model_type == "bailing_hybrid", linear
        assert linear.num_heads == g.num_attention_heads, linear  # Bailing: one head count
        config["short_conv_kernel_size"] = linear.conv_kernel
        config["head_dim"] = linear.head_dim  # KDA's; MLA's comes from its own keys
        config["layer_group_size"] = g.num_hidden_layers // g.full_attention_layers
    for key in ("target_layer_ids", "num_target_layers", "block_size", "mask_token_id",
                "draft_vocab_size"):
        if getattr(g, key) is not None:
            config[key] = getattr(g, key)
    if g.verifier is not None:
        config["speculators_config"] = {"verifier": {"name_or_path": g.verifier}}
    return config


def write_checkpoint(folder: Path, art: ArtifactLock) -> Path:
    """A checkpoint folder holding only the config.json of the lock's geometry."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config_of(art.geometry), indent=2))
    return folder


FLAG_FIELDS = {"engine", "speculation.method", "deployment.gpu",
               "deployment.parallel.tensor", "deployment.kv_cache_dtype",
               "deployment.draft_kv_cache_dtype", "deployment.context_length",
               "deployment.memory_fraction", "deployment.max_running_requests",
               "speculation.num_speculative_tokens", "speculation.block_size",
               "acceptance.slo.min_length"}
"""Runbook fields an option of their own sets; every other field goes by --set."""
SECTIONS = ("target", "draft", "speculation", "deployment", "geometry", "codesign",
            "acceptance", "workloads")
"""The runbook sections that describe the pair, its deployment and what its break-even
is evaluated at (a derived schedule picks K by the acceptance); the rest (name, staging,
alerts, kubernetes, waivers) are no input of a budget."""
ARTIFACT_KEYS = {"repo", "path", "revision", "bundled"}


def _leaves(value: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [leaf for key, child in value.items()
                for leaf in _leaves(child, f"{prefix}.{key}")]
    return [] if value == {} else [(prefix, value)]


def flags_of(rb: Runbook, target: Path, draft: Path | None, target_bytes: int,
             draft_bytes: int | None) -> list[str]:
    """The one-command budget of the runbook's pair: explicit options for what they set,
    --set for every other field the runbook gives a value other than its default."""
    dep, spec = rb.deployment, rb.speculation
    flags = ["--target", str(target), "--engine", f"{rb.engine.name.value}=={rb.engine.version}",
             "--method", spec.method.value, "--gpu", str(dep.gpu),
             "--tp", str(dep.parallel.tensor), "--context-length", str(dep.context_length),
             "--target-bytes", str(target_bytes)]
    if rb.draft is not None:
        flags += ["--draft", "bundled" if rb.draft.bundled else str(draft)]
    if draft_bytes is not None:
        flags += ["--draft-bytes", str(draft_bytes)]
    for option, given in (("--kv-dtype", dep.kv_cache_dtype.value),
                          ("--draft-kv-dtype", dep.draft_kv_cache_dtype and
                           dep.draft_kv_cache_dtype.value),
                          ("--memory-fraction", dep.memory_fraction),
                          ("--max-running-requests", dep.max_running_requests),
                          ("--num-speculative-tokens", spec.num_speculative_tokens),
                          ("--block-size", spec.block_size),
                          ("--slo", rb.acceptance.slo.min_length)):
        if given is not None and given != "auto":
            flags += [option, str(given)]
    written = rb.model_dump(mode="json", exclude_defaults=True)
    for section in SECTIONS:
        for key, value in _leaves(written.get(section, {}), section):
            first = key.split(".")[1] if "." in key else ""
            if key in FLAG_FIELDS or (section in ("target", "draft") and first in ARTIFACT_KEYS):
                continue
            flags += ["--set", f"{key}={json.dumps(value)}"]
    return flags
