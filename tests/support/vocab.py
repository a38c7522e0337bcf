"""Pairs whose target and draft vocabularies differ, and the restrictions they must satisfy."""

from __future__ import annotations

from typing import Any

from specpair.model.lock import Fallback, VocabMapping
from specpair.resolve.pair import ResolvedPair
from tests.support.geometries import dense
from tests.support.pairs import make_pair


def hetero(speculation: dict[str, Any] | None = None, deployment: dict[str, Any] | None = None,
           engine: str = "vllm", version: str = "0.33.0") -> ResolvedPair:
    draft = dense(4).model_copy(update={"vocab_size": 32000})
    return make_pair(dense(36), draft, engine=engine, version=version, speculation={
        "method": "STANDALONE", "num_speculative_tokens": 4, "heterogeneous_vocab": True,
        **(speculation or {})}, deployment=deployment)


# each restriction: (field it is reported on, the change that breaks it, the engine's words)
RESTRICTIONS: dict[str, tuple[str, dict[str, dict[str, Any]], str]] = {
    "method draft_model only": (
        "speculation.heterogeneous_vocab", {"speculation": {"method": "EAGLE3"}},
        "only works with method='draft_model'"),
    "greedy draft sampling only": (
        "speculation.draft_sample_method",
        {"speculation": {"draft_sample_method": "probabilistic"}},
        "only supports greedy draft sampling"),
    "no local argmax reduction": (
        "speculation.local_argmax_reduction",
        {"speculation": {"local_argmax_reduction": True}},
        "not compatible with use_local_argmax_reduction"),
    "V1 runner: draft TP equals target TP": (
        "deployment.parallel.draft_tensor",
        {"deployment": {"parallel": {"tensor": 2, "draft_tensor": 1}}},
        "draft TP equal to the target's (2), not 1"),
}


PASSING: dict[str, dict[str, dict[str, Any]]] = {
    "method draft_model only": {"speculation": {"method": "STANDALONE"}},
    "greedy draft sampling only": {"speculation": {"draft_sample_method": "greedy"}},
    "no local argmax reduction": {"speculation": {"local_argmax_reduction": False}},
    "V1 runner: draft TP equals target TP": {
        "deployment": {"parallel": {"tensor": 2, "draft_tensor": 2}}},
}


def mapping(**update: Any) -> VocabMapping:
    base = VocabMapping(target_vocab=151936, draft_vocab=32000, intersection=24000,
                        target_markers=["\u0120"], draft_markers=["\u2581"],
                        target_fallback=Fallback(kind="eos", token_id=151643),
                        draft_fallback=Fallback(kind="unk", token_id=0),
                        special_mapped={"target eos </s>": True}, provenance="declared")
    return base.model_copy(update=update)
