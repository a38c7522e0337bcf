"""The oracle corpus: real config.json files (tests/fixtures/configs, sources in SOURCES.md)
paired the way people serve them with speculation, and the cases run on each pair.

A pair names its target folder, its draft (a folder, `BUNDLED` for built-in MTP/NEXTN
layers, or None for a draft-free method) and the speculation block of its runbook.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from specpair.engines.kv_arithmetic import check_tensor_parallel
from specpair.engines.registry import get_release
from specpair.lock.hub import engine_classes
from specpair.model.config_geometry import from_hf_config
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry
from specpair.model.runbook import Runbook
from specpair.resolve.pair import ResolvedPair, served
from tests.support.pairs import SHA, artifact

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
# the outside corpus: every config of public collections, taken wholesale (SOURCES.json)
CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
BUNDLED = "bundled"

EAGLE3 = {"method": "EAGLE3", "num_speculative_tokens": 3}
MTP = {"method": "MTP", "num_speculative_tokens": 3}
NGRAM = {"method": "NGRAM", "num_speculative_tokens": 3}
DFLASH = {"method": "DFLASH", "block_size": 16}
DSPARK = {"method": "DSPARK", "block_size": 7}


@dataclass(frozen=True)
class CorpusPair:
    name: str
    target: str
    draft: str | None
    speculation: dict[str, Any]
    engines: tuple[str, ...] = ("sglang", "vllm")
    """engines that can load the pair; specpair must refuse it for the others"""
    root: Path = CONFIGS
    """the folder holding the config folders"""
    releases: tuple[str, ...] | None = None
    """the releases whose own pool code sizes the pair as specpair does (None: every
    one); the others must keep its layout off their allowlist"""

    def path(self, folder: str) -> Path:
        return self.root / folder


PAIRS = [
    CorpusPair("llama31-8b-eagle3-specforge", "meta-llama__Llama-3.1-8B-Instruct",
               "sgl-project__SpecForge-llama3-8B-eagle3", EAGLE3),
    CorpusPair("llama31-8b-eagle3-reference", "meta-llama__Llama-3.1-8B-Instruct",
               "SafeAILab__EAGLE-traineagle3", EAGLE3),
    CorpusPair("llama31-8b-eagle3-speculators", "meta-llama__Llama-3.1-8B-Instruct",
               "nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted", EAGLE3, ("vllm",)),
    CorpusPair("llama31-70b-eagle3", "meta-llama__Meta-Llama-3.1-70B",
               "sgl-project__SpecForge-llama3-70B-ealge3", EAGLE3),
    CorpusPair("qwen3-8b-eagle3", "Qwen__Qwen3-8B", "sgl-project__SpecForge-qwen3-8b-eagle3",
               EAGLE3),
    CorpusPair("qwen3-8b-dflash", "Qwen__Qwen3-8B", "sgl-project__SpecForge-qwen3-8b-dflash",
               DFLASH),
    CorpusPair("qwen3-8b-dspark", "Qwen__Qwen3-8B", "sgl-project__SpecForge-qwen3-8b-dspark",
               DSPARK),
    CorpusPair("qwen3-32b-ngram", "Qwen__Qwen3-32B", None, NGRAM),
    CorpusPair("qwen3-0-6b-ngram", "Qwen__Qwen3-0.6B", None, NGRAM),
    CorpusPair("qwen3-30b-a3b-ngram", "Qwen__Qwen3-30B-A3B", None, NGRAM),
    CorpusPair("qwen3-235b-a22b-ngram", "Qwen__Qwen3-235B-A22B", None, NGRAM),
    CorpusPair("qwen2-5-7b-ngram", "Qwen__Qwen2.5-7B", None, NGRAM),
    CorpusPair("qwen2-5-72b-ngram", "Qwen__Qwen2.5-72B", None, NGRAM),
    CorpusPair("mixtral-8x7b-ngram", "mistralai__Mixtral-8x7B-v0.1", None, NGRAM),
    CorpusPair("mixtral-8x22b-ngram", "mistralai__Mixtral-8x22B-v0.1", None, NGRAM),
    CorpusPair("deepseek-v3-mtp", "deepseek-ai__DeepSeek-V3", BUNDLED, MTP),
    CorpusPair("deepseek-r1-mtp", "deepseek-ai__DeepSeek-R1", BUNDLED, MTP),
    CorpusPair("kimi-k2-ngram", "moonshotai__Kimi-K2-Instruct", None, NGRAM),
    CorpusPair("glm-4-7-flash-ngram", "zai-org__GLM-4.7-Flash", None, NGRAM),
    CorpusPair("glm-4-7-ngram", "zai-org__GLM-4.7-FP8", None, NGRAM),
    CorpusPair("minimax-m2-5-ngram", "MiniMaxAI__MiniMax-M2.5", None, NGRAM),
    CorpusPair("gpt-oss-20b-ngram", "openai__gpt-oss-20b", None, NGRAM),
    CorpusPair("gpt-oss-120b-ngram", "openai__gpt-oss-120b", None, NGRAM),
    CorpusPair("qwen3-next-mtp", "Qwen__Qwen3-Next-80B-A3B-Thinking", BUNDLED, MTP),
    CorpusPair("qwen3-next-ngram", "Qwen__Qwen3-Next-80B-A3B-Thinking", None, NGRAM),
    CorpusPair("qwen3-5-27b-mtp", "Qwen__Qwen3.5-27B", BUNDLED, MTP),
    # Qwen3.5's MoE model and GLM-4.7 with their MTP layers. Not MiniMax-M2.5's or
    # Step-3.7-Flash's: SGLang keeps twice specpair's draft cell, vLLM has no Step-3.7
    # class; their MTP layers stay refused by the allowlist. sglang 0.5.18 keeps a draft of
    # GLM-4.7's full depth (twice specpair's cell), so only the later releases list it.
    CorpusPair("qwen3-5-35b-a3b-mtp", "Qwen__Qwen3.5-35B-A3B", BUNDLED, MTP, root=CORPUS),
    CorpusPair("glm-4-7-mtp", "zai-org__GLM-4.7-FP8", BUNDLED, MTP,
               releases=("sglang 0.5.23", "vllm 0.32.0", "vllm 0.33.0", "vllm 0.34.0")),
    CorpusPair("llama4-scout-ngram", "meta-llama__Llama-4-Scout-17B-16E-Instruct", None, NGRAM),
    # chunked local attention with a method that drafts from the target's hidden states:
    # vLLM's VllmConfig turns its hybrid KV cache manager off for that combination, which
    # the n-gram pair above never meets (issue 54's method-switched budgets)
    CorpusPair("llama4-scout-eagle3", "sgl-project__ome-testdata-llama4_scout_17b_16e",
               "sgl-project__SpecForge-llama4-scout-17B-16E-eagle3", EAGLE3, root=CORPUS),
    CorpusPair("llama4-maverick-ngram", "meta-llama__Llama-4-Maverick-17B-128E-Instruct", None,
               NGRAM),
]

# configs whose layout specpair refuses, with the key the refusal must name
REFUSED = {
    "XiaomiMiMo__MiMo-V2-Flash": "hybrid_layer_pattern",
    "nvidia__Nemotron-H-56B-Base-8K": "hybrid_override_pattern",
    "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "hybrid_override_pattern",
}

TENSOR_PARALLEL = (1, 2, 4, 8)
KV_DTYPES = ("auto", "fp8_e4m3")


def config(folder: str, root: Path = CONFIGS) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((root / folder / "config.json").read_text())
    return loaded


@cache
def geometry(folder: str, root: Path = CONFIGS, draft: bool = False) -> Geometry:
    """The config's geometry (read once: pairs are made per TP size and KV dtype)."""
    return from_hf_config(config(folder, root), engine_classes(), draft)


def corpus_targets() -> list[CorpusPair]:
    """Every target config of the outside corpus, served alone (NGRAM: no draft pool), so
    that each one's own layout meets both engines' pool code."""
    entries = json.loads((CORPUS / "SOURCES.json").read_text(encoding="utf-8"))
    return [CorpusPair("corpus-" + re.sub(r"[^a-z0-9]+", "-", e["folder"].lower()).strip("-"),
                       e["folder"], None, NGRAM, root=CORPUS)
            for e in entries if e["role"] == "target"]


def local_layers(g: Geometry) -> int:
    """Layers a hybrid KV manager keeps windowed: sliding-window and chunked local."""
    return g.sliding_window_layers + g.chunked_attention_layers


def bundled_geometry(target: Geometry, engine: str, version: str) -> Geometry:
    """The built-in draft as `specpair lock` resolves it for that release
    (hub.bundled_draft over the release's draft mode)."""
    release = get_release(engine, version)
    assert release is not None, (engine, version)
    target = release.draft_mode(target)
    layers = target.num_nextn_predict_layers
    return target.model_copy(update={
        "num_hidden_layers": layers, "full_attention_layers": layers, "layers": None,
        "sliding_window_layers": 0, "sliding_window": None, "chunked_attention_layers": 0,
        "attention_chunk_size": None, "linear_attention": None,
        "moe": None, "architecture": f"{target.architecture} (built-in MTP layers)"})


def make_pair(corpus: CorpusPair, engine: str, version: str, tp: int, kv: str,
              deployment: dict[str, Any] | None = None) -> ResolvedPair | None:
    """The pair as a runbook over the local config folders; None when its head counts do
    not split over `tp` ranks (the engines refuse such a launch). The geometries are
    served as the resolver serves a runbook's (`--dtype auto`)."""
    target = served(geometry(corpus.target, corpus.root))
    draft: Geometry | None
    data: dict[str, Any] = {
        "pair": {"name": corpus.name, "title": corpus.name, "owner": "tests"},
        "engine": {"name": engine, "version": version},
        "target": {"path": str(corpus.path(corpus.target))},
        "speculation": corpus.speculation,
        "deployment": {"gpu": "H200-141GB", "context_length": 2048, "memory_fraction": 0.9,
                       "parallel": {"tensor": tp}, "kv_cache_dtype": kv,
                       **(deployment or {})},
        "acceptance": {"slo": {"min_length": 1.5}},
    }
    if corpus.draft is None:
        draft = None
        data["staging"] = {"order": ["target"]}
    elif corpus.draft == BUNDLED:
        draft = bundled_geometry(target, engine, version)
        data["draft"] = {"bundled": True}
        data["staging"] = {"order": ["target"]}
    else:
        draft = served(geometry(corpus.draft, corpus.root, draft=True))
        data["draft"] = {"path": str(corpus.path(corpus.draft))}
    rb = Runbook.model_validate(data)
    pair = ResolvedPair(
        name=corpus.name, source_file=f"runbooks/{corpus.name}/runbook.yaml", runbook=rb,
        engine=f"{engine} {version}", gpu=rb.deployment.gpu,
        target=artifact("target", target, 1 << 30),
        draft=artifact("draft", draft, 1 << 28, bundled=corpus.draft == BUNDLED)
        if draft is not None else None)
    try:
        check_tensor_parallel(pair)
    except SpecpairError:
        return None
    return pair


__all__ = ["BUNDLED", "CONFIGS", "CORPUS", "KV_DTYPES", "PAIRS", "REFUSED", "SHA",
           "TENSOR_PARALLEL", "CorpusPair", "make_pair"]
