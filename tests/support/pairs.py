"""Build resolved pairs in memory, for tests that vary geometry and deployment freely."""

from __future__ import annotations

from typing import Any

from specpair.engines.pair_input import ResolvedArtifact
from specpair.facts import hardware
from specpair.model.geometry import Geometry
from specpair.model.lock import Source, Tokenizer, Weights
from specpair.model.runbook import Runbook
from specpair.resolve.pair import ResolvedPair
from tests.support.geometries import dense

SHA = "0123456789abcdef0123456789abcdef01234567"
HUB = f"hub@{SHA}"  # as `specpair lock` writes a resolved artifact (consistent for SP105)


def artifact(role: str, geometry: Geometry, weight_bytes: int = 0,
             bundled: bool = False) -> ResolvedArtifact:
    return ResolvedArtifact(
        role=role, source=Source(repo=f"org/{role}", revision=SHA, commit=SHA),
        bundled=bundled, provenance=HUB, geometry=geometry,
        weights=Weights(params_by_dtype={"BF16": weight_bytes // 2}, weight_bytes=weight_bytes,
                        provenance=HUB),
        download_bytes=0 if bundled else weight_bytes,
        tokenizer=Tokenizer(vocab_size=geometry.vocab_size, provenance=HUB),
        unconfirmed=[], overridden=[], sources={})


def make_pair(target: Geometry, draft: Geometry | None, *, engine: str = "sglang",
              version: str = "0.5.23", speculation: dict[str, Any] | None = None,
              deployment: dict[str, Any] | None = None, target_bytes: int = 16 << 30,
              draft_bytes: int = 1 << 30) -> ResolvedPair:
    spec = speculation or {"method": "DSPARK", "block_size": 8}
    data: dict[str, Any] = {
        "pair": {"name": "test-pair", "title": "Test pair", "owner": "tests"},
        "engine": {"name": engine, "version": version},
        "target": {"repo": "org/target", "revision": SHA},
        "speculation": spec,
        "deployment": {"gpu": "H100-80GB", "context_length": 8192, **(deployment or {})},
        "acceptance": {"slo": {"min_length": 2.0}},
    }
    if draft is not None:
        data["draft"] = {"repo": "org/draft", "revision": SHA}
    else:
        data["staging"] = {"order": ["target"]}
    rb = Runbook.model_validate(data)
    return ResolvedPair(
        name="test-pair", source_file="runbooks/test-pair/runbook.yaml", runbook=rb,
        engine=f"{engine} {version}", gpu=hardware.display_key(rb.deployment.gpu),
        target=artifact("target", target, target_bytes),
        draft=artifact("draft", draft, draft_bytes) if draft is not None else None)


def with_runbook(pair: ResolvedPair, **sections: dict[str, Any]) -> ResolvedPair:
    data = pair.runbook.model_dump(mode="json")
    for key, update in sections.items():
        data[key] = {**(data.get(key) or {}), **update}
    return pair.model_copy(update={"runbook": pair.runbook.model_validate(data)})


def _eagle(draft_layers: int = 1, context: int = 512, concurrency: int = 1):  # type: ignore[no-untyped-def]
    return make_pair(dense(32), dense(draft_layers),
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 4},
                     deployment={"context_length": context, "concurrency": concurrency},
                     target_bytes=16 << 30, draft_bytes=draft_layers * (400 << 20))


# a healthy DSPARK pair: draft trained for this 36-layer target, hidden sizes equal
DRAFT = Geometry(architecture="DSparkDraftModel", dtype="bfloat16", hidden_size=4096,
                 vocab_size=151936, max_position_embeddings=40960, num_hidden_layers=5,
                 attention="mha", full_attention_layers=5, num_attention_heads=32,
                 num_key_value_heads=8, head_dim=128, v_head_dim=128,
                 target_layer_ids=[1, 9, 17, 25, 33], block_size=7, mask_token_id=151669)


def good() -> ResolvedPair:
    return make_pair(dense(36), DRAFT, speculation={"method": "DSPARK", "block_size": 7},
                     deployment={"context_length": 8192},
                     target_bytes=16 << 30, draft_bytes=2 << 30)
