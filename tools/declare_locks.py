"""Write the example pairs' declared locks (provenance `declared`).

The example runbooks name real checkpoints that cannot be reached from CI, so their
locks are declared from public sources (the model cards and READMEs named in each lock's
`sources`, and the config copies under tests/fixtures/configs/, see their SOURCES.md).
Geometry comes from a real config.json where one was retrieved; parameter counts that no
source states are derived from the geometry and listed as unconfirmed. `specpair lock`
replaces all of it with resolved facts once the hub is reachable.

Run: python tools/declare_locks.py   (rewrites runbooks/*/lock.json)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specpair.generate.render import dump_json
from specpair.model.config_geometry import from_hf_config
from specpair.model.geometry import Geometry, LinearAttention, MixtureOfExperts
from specpair.model.lock import (
    ArtifactLock,
    Fallback,
    Lock,
    Source,
    Tokenizer,
    VocabMapping,
    Weights,
)
from specpair.write.writer import atomic_write

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"


def config(folder: str) -> dict[str, Any]:
    return json.loads((CONFIGS / folder / "config.json").read_text())


def dense_params(g: Geometry, intermediate: int, *, tied: bool = False, qk_norm: bool = False,
                 embeddings: bool = True) -> int:
    """Parameters of a Llama/Qwen3-style dense decoder, from its geometry."""
    h, hd = g.hidden_size, g.head_dim
    attn = h * g.num_attention_heads * hd + 2 * h * g.num_key_value_heads * hd \
        + g.num_attention_heads * hd * h + (2 * hd if qk_norm else 0)
    layer = attn + 3 * h * intermediate + 2 * h
    emb = g.vocab_size * h * (1 if tied else 2) if embeddings else 0
    return g.num_hidden_layers * layer + emb + h


def artifact(source: Source, geometry: Geometry, params: dict[str, int], bytes_per: dict[str, int],
             download: int, *, unconfirmed: list[str], sources: dict[str, str],
             active: int | None = None) -> ArtifactLock:
    weight_bytes = sum(n * bytes_per[d] for d, n in params.items())
    return ArtifactLock(
        source=source, provenance="declared", geometry=geometry,
        weights=Weights(params_by_dtype=params, weight_bytes=weight_bytes, active_params=active,
                        provenance="declared"),
        download_bytes=download,
        tokenizer=Tokenizer(vocab_size=geometry.vocab_size, provenance="declared"),
        unconfirmed=sorted(unconfirmed), sources=sources)


def hub(repo: str, revision: str, commit: str | None = None) -> Source:
    return Source(repo=repo, revision=revision, commit=commit)


BF16 = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}
FIXTURE = "tests/fixtures/configs/{}/config.json ({})"


def ling() -> Lock:
    target = Geometry(
        architecture="BailingMoeV3ForCausalLM", model_type="bailing_hybrid", dtype="bfloat16",
        hidden_size=2560, vocab_size=157184, max_position_embeddings=262144,
        num_hidden_layers=42, attention="mla", full_attention_layers=7,
        linear_attention=LinearAttention(kind="kda", layers=35, num_heads=32, head_dim=128,
                                         conv_kernel=4),
        num_attention_heads=32, num_key_value_heads=32, head_dim=192, v_head_dim=128,
        kv_lora_rank=512, qk_rope_head_dim=64, num_nextn_predict_layers=1,
        # 512 routed experts of 768 (gate, up, down over hidden 2560), top-8, dense first 2
        moe=MixtureOfExperts(experts=512, active_experts=8, expert_params=3 * 2560 * 768,
                             moe_layers=40))
    draft = Geometry(
        architecture="LingDSparkModel", dtype="bfloat16", hidden_size=2560, vocab_size=157184,
        max_position_embeddings=262144, num_hidden_layers=5, attention="mha",
        full_attention_layers=5, num_attention_heads=32, num_key_value_heads=32, head_dim=80,
        v_head_dim=80, target_layer_ids=[1, 11, 23, 29, 35], block_size=8)
    weight_bytes = 254_500_000_000
    return Lock(pair="ling-3-flash-dspark", target=artifact(
        hub("inclusionAI/Ling-3.0-flash", "e0dfe7cd0f6e3b572bbbc0a8a84947469e428cc3",
            "e0dfe7cd0f6e3b572bbbc0a8a84947469e428cc3"), target,
        {"BF16": weight_bytes // 2}, BF16, weight_bytes, active=5_100_000_000,
        unconfirmed=["geometry.dtype", "geometry.linear_attention.conv_kernel",
                     "weights.params_by_dtype", "weights.active_params", "download_bytes"],
        sources={"geometry": "Ling-3.0-flash config.json subsets in third-party tests and "
                             "validators; layer schedule group 6 → MLA at 5,11,...,41",
                 "geometry.linear_attention.conv_kernel": "third-party Megatron-Bridge "
                             "validator pins short_conv_kernel_size 4",
                 "download_bytes": "sum of the HF tree listing at e0dfe7cd (24 shards, "
                                   "about 254.5 GB), DERIVED",
                 "weights": "DERIVED: download bytes / 2 (BF16 release); active 5.1B from "
                            "vendor pages ('124B-A5.1B')"}),
        draft=artifact(
            hub("inclusionAI/Ling-3.0-flash-dspark", "main"), draft,
            {"BF16": 961_316_865}, BF16, 961_316_865 * 2,
            unconfirmed=["geometry.architecture", "geometry.vocab_size", "geometry.head_dim",
                         "geometry.mask_token_id", "weights.params_by_dtype", "download_bytes"],
            sources={"geometry": "draft model card (huggingface.co/inclusionAI/"
                                 "Ling-3.0-flash-dspark README): 5 layers, "
                                 "hidden 2560, 32/32 heads, block 8, aux layers 1/11/23/29/35",
                     "geometry.head_dim": "DERIVED 2560/32 = 80 (not stated)",
                     "weights": "safetensors count 961,316,865 from a GGUF re-upload summary "
                                "[secondary]"}))


def qwen3_dflash() -> Lock:
    tg = from_hf_config(config("Qwen__Qwen3-8B"))
    dg = from_hf_config(config("sgl-project__SpecForge-qwen3-8b-dflash"))
    tp = dense_params(tg, 12288, qk_norm=True)
    # DFlash: 5 Qwen3 layers + fc (5 features × H → H) + two norms; reuses target embed/head
    dp = dense_params(dg, 12288, qk_norm=True, embeddings=False) + 5 * 4096 * 4096 + 4096
    return Lock(pair="qwen3-8b-dflash", target=artifact(
        hub("Qwen/Qwen3-8B", "main"), tg, {"BF16": tp}, BF16, tp * 2,
        unconfirmed=["weights.params_by_dtype", "download_bytes"],
        sources={"geometry": FIXTURE.format("Qwen__Qwen3-8B", "published"),
                 "weights": "DERIVED from the geometry (card: 8.2B)"}),
        draft=artifact(
            hub("z-lab/Qwen3-8B-DFlash-b16", "main"), dg, {"BF16": dp}, BF16, dp * 2,
            unconfirmed=["geometry", "weights.params_by_dtype", "download_bytes"],
            sources={"geometry": FIXTURE.format("sgl-project__SpecForge-qwen3-8b-dflash",
                                                "SpecForge training config, same recipe; "
                                                "z-lab's own config.json not retrieved"),
                     "weights": "DERIVED from the geometry"}))


def llama31_eagle3() -> Lock:
    tg = from_hf_config(config("meta-llama__Llama-3.1-8B-Instruct"))
    dg = from_hf_config(config("sgl-project__SpecForge-llama3-8B-eagle3"))
    tp = dense_params(tg, 14336)
    h = 4096
    # EAGLE-3 head: fc 3H→H, one layer whose QKV read 2H, draft lm_head over 32k tokens
    dp = 3 * h * h + (2 * h * 4096 + 2 * 2 * h * 1024 + 4096 * h) + 3 * h * 14336 + 3 * h \
        + 32000 * h
    return Lock(pair="llama31-8b-eagle3", target=artifact(
        hub("meta-llama/Llama-3.1-8B-Instruct", "main"), tg, {"BF16": tp}, BF16, tp * 2,
        unconfirmed=["weights.params_by_dtype", "download_bytes"],
        sources={"geometry": FIXTURE.format("meta-llama__Llama-3.1-8B-Instruct", "published"),
                 "weights": "DERIVED from the geometry (commonly quoted 8.03B)"}),
        draft=artifact(
            hub("lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B", "main"), dg, {"F16": dp}, BF16,
            dp * 2,
            unconfirmed=["geometry", "weights.params_by_dtype", "download_bytes"],
            sources={"geometry": FIXTURE.format("sgl-project__SpecForge-llama3-8B-eagle3",
                                                "SpecForge template; lmsys config not "
                                                "retrieved"),
                     "weights": "DERIVED from the geometry; a third-party table quotes ~0.25B"}))


def llama33_eagle3() -> Lock:
    tg = Geometry(
        architecture="LlamaForCausalLM", model_type="llama", dtype="bfloat16", hidden_size=8192,
        vocab_size=128256, max_position_embeddings=131072, num_hidden_layers=80,
        attention="mha", full_attention_layers=80, num_attention_heads=64,
        num_key_value_heads=8, head_dim=128, v_head_dim=128)
    dg = from_hf_config(config("sgl-project__SpecForge-llama3-70B-ealge3"))
    dg = dg.model_copy(update={"verifier": "meta-llama/Llama-3.3-70B-Instruct"})
    tp = dense_params(tg, 28672)
    h = 8192
    dp = 3 * h * h + (2 * h * 8192 + 2 * 2 * h * 1024 + 8192 * h) + 3 * h * 28672 + 3 * h \
        + 32000 * h
    return Lock(pair="llama33-70b-eagle3-vllm", target=artifact(
        hub("meta-llama/Llama-3.3-70B-Instruct", "main"), tg, {"BF16": tp}, BF16, tp * 2,
        unconfirmed=["geometry.dtype", "weights.params_by_dtype", "download_bytes"],
        sources={"geometry": "oumi-ai/oumi configs/recipes/llama3_3/README.md; head_dim "
                             "DERIVED",
                 "weights": "DERIVED from the geometry (commonly quoted 70.6B)"}),
        draft=artifact(
            hub("RedHatAI/Llama-3.3-70B-Instruct-speculator.eagle3", "main"), dg, {"BF16": dp},
            BF16, dp * 2,
            unconfirmed=["geometry", "weights.params_by_dtype", "download_bytes"],
            sources={"geometry": FIXTURE.format("sgl-project__SpecForge-llama3-70B-ealge3",
                                                "SpecForge template; the RedHat speculator "
                                                "config was not retrieved"),
                     "geometry.verifier": "speculators format names its verifier (declared)",
                     "weights": "DERIVED from the geometry"}))


def deepseek_mtp() -> Lock:
    tg = from_hf_config(config("deepseek-ai__DeepSeek-V3"))
    assert tg.moe is not None
    # one MLA layer: the per-layer list keeps the first of the target's (all alike)
    dg = tg.model_copy(update={"num_hidden_layers": 1, "full_attention_layers": 1,
                               "architecture": "DeepseekV3ForCausalLM (MTP layer)",
                               "layers": tg.layers[:1] if tg.layers else None,
                               "moe": tg.moe.model_copy(update={"moe_layers": 1})})
    main_params, mtp_params = 671_000_000_000, 14_000_000_000
    source = hub("deepseek-ai/DeepSeek-V3", "main")
    return Lock(pair="deepseek-v3-mtp", target=artifact(
        source, tg, {"F8_E4M3": main_params + mtp_params}, BF16, main_params + mtp_params,
        active=37_000_000_000 + mtp_params * 37 // 671,
        unconfirmed=["weights.params_by_dtype", "weights.active_params", "download_bytes"],
        sources={"geometry": FIXTURE.format("deepseek-ai__DeepSeek-V3", "published"),
                 "weights": "README: 671B main + 14B MTP, FP8 e4m3 release, 37B activated; "
                            "BF16 norms and F32 block scales not counted (declared "
                            "approximation)"}),
        draft=inside_target(artifact(
            source, dg, {"F8_E4M3": mtp_params}, BF16, 0, active=mtp_params * 37 // 671,
            unconfirmed=["weights.params_by_dtype", "weights.active_params"],
            sources={"geometry": "the target's MLA geometry, num_nextn_predict_layers = 1",
                     "weights": "README: 14B MTP module, inside the target checkpoint; "
                                "active share DERIVED as the target's 37/671"})))


def inside_target(draft: ArtifactLock) -> ArtifactLock:
    """A bundled draft: its weights are part of the target's (no separate download)."""
    return draft.model_copy(update={"weights": draft.weights.model_copy(
        update={"inside_target": True})})


QWEN25_CARD = ("Qwen2.5-0.5B-Instruct model card (24 layers, 14 Q / 2 KV heads, tied "
               "embeddings, 32,768 context, 0.49B parameters)")
QWEN25_CONFIG = ("a public copy of Qwen/Qwen2.5-0.5B-Instruct's config.json in a GitHub README "
                 "(DongfuJiang's chunking fork, only architectures/model_type changed): hidden "
                 "896, intermediate 4864, vocab_size 151936, eos_token_id 151645")
SGLANG_TLI = ("sgl-project/sglang PR #22883 (TLI for SGLang, by an author of the TLI paper): "
              "Llama-3.1-8B-Instruct + Qwen2.5-0.5B-Instruct, vocab intersection 85.43% of "
              "target, 72.24% of draft")


def llama31_qwen25_tli() -> Lock:
    """A published cross-tokenizer pair (SGLang PR #22883's benchmark) on vLLM's
    heterogeneous-vocabulary mode. The tokenizers could not be read offline, so the
    intersection is declared from the published shares, as the range they admit."""
    tg = from_hf_config(config("meta-llama__Llama-3.1-8B-Instruct"))
    dg = Geometry(
        architecture="Qwen2ForCausalLM", model_type="qwen2", dtype="bfloat16", hidden_size=896,
        vocab_size=151936, max_position_embeddings=32768, num_hidden_layers=24,
        attention="mha", full_attention_layers=24, num_attention_heads=14,
        num_key_value_heads=2, head_dim=64, v_head_dim=64)
    tp = dense_params(tg, 14336)
    dp = dense_params(dg, 4864, tied=True) + 24 * (896 + 2 * 128)  # + q/k/v biases
    # 85.43% of 128,256 target tokens and 72.24% of the draft tokenizer's 151,665 entries
    # (151,643 BPE + 22 added) both hold for 109,562-109,570 shared tokens; against the
    # draft's 151,936 embedding rows (the engine's denominator) the ranges would not meet,
    # so the published draft share is over the tokenizer's length.
    mapping = VocabMapping(
        target_vocab=tg.vocab_size, draft_vocab=dg.vocab_size, intersection=109_562,
        intersection_max=109_570, target_markers=["\u0120"], draft_markers=["\u0120"],
        target_fallback=Fallback(kind="eos", token_id=128009),
        draft_fallback=Fallback(kind="eos", token_id=151645),
        special_mapped={"target eos <|eot_id|>": False}, provenance="declared",
        unconfirmed=["intersection", "target_markers", "draft_markers", "target_fallback",
                     "draft_fallback", "special_mapped"],
        sources={"intersection": SGLANG_TLI + "; the range both shares admit (DERIVED)",
                 "markers": "both are byte-level BPE tokenizers (GPT-2 'Ġ' word starts); "
                            "not probed: the tokenizer files were not retrieved",
                 "fallbacks": "neither tokenizer_config declares an unk_token; eos "
                              "<|eot_id|> (128009, in the target config's eos list) and "
                              "<|im_end|> (151645, the draft config's eos_token_id)",
                 "special_mapped": "Qwen2.5's added tokens have no <|eot_id|>"})
    return Lock(pair="llama31-8b-qwen25-tli-vllm", target=artifact(
        hub("meta-llama/Llama-3.1-8B-Instruct", "main"), tg, {"BF16": tp}, BF16, tp * 2,
        unconfirmed=["weights.params_by_dtype", "download_bytes"],
        sources={"geometry": FIXTURE.format("meta-llama__Llama-3.1-8B-Instruct", "published"),
                 "weights": "DERIVED from the geometry (commonly quoted 8.03B)"}),
        draft=artifact(
            hub("Qwen/Qwen2.5-0.5B-Instruct", "main"), dg, {"BF16": dp}, BF16, dp * 2,
            unconfirmed=["geometry", "weights.params_by_dtype", "download_bytes"],
            sources={"geometry": f"{QWEN25_CONFIG}; {QWEN25_CARD}",
                     "weights": "DERIVED from the geometry (card: 0.49B)"}),
        vocab_mapping=mapping)


def main() -> None:
    for lock in (ling(), qwen3_dflash(), llama31_eagle3(), llama33_eagle3(), deepseek_mtp(),
                 llama31_qwen25_tli()):
        path = ROOT / "runbooks" / lock.pair / "lock.json"
        atomic_write(path, dump_json(lock.model_dump(mode="json", exclude_none=True)))
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
