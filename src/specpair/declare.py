"""`specpair lock --declare`: a declared lock from config.json files and declared sizes.

For air-gapped planning, when neither the hub nor the checkpoint folder is at hand: the
geometry comes from a config.json the author has (a model card's copy, a colleague's
download), the weight bytes from the model card. Nothing confirms either, so every fact
is listed as unconfirmed; the gate reports them (SP104) until `specpair lock` with hub
access or a local folder replaces the lock with resolved facts.
"""

from __future__ import annotations

from pathlib import Path

from specpair.errors import SpecpairError
from specpair.hub import (
    TORCH_TO_SAFETENSORS,
    bundled_geometry,
    config_source,
    geometry_from_config,
)
from specpair.load import read_text
from specpair.runbooks import LoadedRunbook
from specpair.schema.lock import ArtifactLock, Lock, Source, Tokenizer, Weights
from specpair.schema.runbook import Artifact

UNCONFIRMED = ["download_bytes", "geometry", "tokenizer", "weights.params_by_dtype",
               "weights.weight_bytes"]
BYTES_PER = {"BF16": 2, "F16": 2, "F32": 4}


def _source(art: Artifact) -> Source:
    # no commit: only a hub resolution may say which commit a revision is
    return Source(repo=art.repo, path=art.path, revision=art.revision)


def declared_artifact(source: Source, config: Path, weight_bytes: int) -> ArtifactLock:
    text = read_text(config)
    geometry = geometry_from_config(text, str(config))
    dtype = TORCH_TO_SAFETENSORS.get(geometry.dtype.lower())
    params = {dtype: weight_bytes // BYTES_PER[dtype]} if dtype else {}
    return ArtifactLock(
        source=source, provenance="declared", geometry=geometry,
        weights=Weights(params_by_dtype=params, weight_bytes=weight_bytes,
                        provenance="declared"),
        download_bytes=weight_bytes,
        tokenizer=Tokenizer(vocab_size=geometry.vocab_size, provenance="declared"),
        unconfirmed=list(UNCONFIRMED),
        # which class read it, or that its custom config code was not run (facts as written)
        sources={"geometry": f"declared: {config.name} given to `specpair lock --declare`; "
                             f"{config_source(text)}",
                 "weights": "declared: weight bytes given on the command line; parameters "
                            f"= bytes / {geometry.dtype} size",
                 "tokenizer": "declared: config.json vocab_size",
                 "download_bytes": "declared: the weight bytes"})


def declare(loaded: LoadedRunbook, target_config: Path, target_bytes: int,
            draft_config: Path | None, draft_bytes: int | None) -> Lock:
    rb = loaded.runbook
    where = str(loaded.document.path)
    target = declared_artifact(_source(rb.target), target_config, target_bytes)
    draft: ArtifactLock | None = None
    if rb.draft is not None:
        if draft_bytes is None:
            raise SpecpairError.single(where, "the runbook has a draft: declare its size",
                                       "add --draft-bytes N (from the draft's model card)")
        if rb.draft.bundled:
            geometry = bundled_geometry(target.geometry)
            draft = target.model_copy(update={
                "geometry": geometry, "download_bytes": 0,
                "weights": Weights(params_by_dtype={}, weight_bytes=draft_bytes,
                                   provenance="declared"),
                "sources": {**target.sources,
                            "geometry": "declared: target config, num_nextn_predict_layers"}})
        elif draft_config is None:
            raise SpecpairError.single(where, "the runbook has a separate draft: declare its "
                                       "config", "add --draft-config PATH/config.json")
        else:
            draft = declared_artifact(_source(rb.draft), draft_config, draft_bytes)
    return Lock(pair=rb.pair.name, target=target, draft=draft)
