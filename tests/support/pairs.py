"""Build resolved pairs in memory, for tests that vary geometry and deployment freely."""

from __future__ import annotations

from typing import Any

from specpair.engines.pair_input import ResolvedArtifact
from specpair.facts import hardware
from specpair.model.geometry import Geometry
from specpair.model.lock import Source, Tokenizer, Weights
from specpair.model.runbook import Runbook
from specpair.resolve.pair import ResolvedPair

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
