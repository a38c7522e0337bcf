"""`specpair lock --declare`: a declared lock from config.json files and declared sizes.

For air-gapped planning, when neither the hub nor the checkpoint folder is at hand: the
geometry comes from a config.json the author has (a model card's copy, a colleague's
download), the weight bytes from the model card. Nothing confirms either, so every fact
is listed as unconfirmed; the gate reports them (SP104) until `specpair lock` with hub
access or a local folder replaces the lock with resolved facts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specpair.engines import registry
from specpair.load.document import read_text
from specpair.load.runbooks import LoadedRunbook
from specpair.lock.hub import (
    TORCH_TO_SAFETENSORS,
    bundled_geometry,
    config_source,
    geometry_from_config,
)
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry
from specpair.model.lock import ArtifactLock, Lock, Source, Tokenizer, Weights
from specpair.model.runbook import Artifact

UNCONFIRMED = ["download_bytes", "geometry", "tokenizer", "weights.params_by_dtype",
               "weights.weight_bytes"]
BYTES_PER = {"BF16": 2, "F16": 2, "F32": 4}


def _source(art: Artifact) -> Source:
    # no commit: only a hub resolution may say which commit a revision is
    return Source(repo=art.repo, path=art.path, revision=art.revision)


def declared_artifact(source: Source, config: Path, weight_bytes: int,
                      draft: bool = False) -> ArtifactLock:
    return declared_from_text(source, read_text(config), str(config), weight_bytes,
                              f"{config.name} given to `specpair lock --declare`", draft)


def declared_from_text(source: Source, text: str, where: str, weight_bytes: int,
                       given: str, draft: bool = False) -> ArtifactLock:
    """A declared artifact from a config.json's text (`given`: where it came from) and
    weight bytes the user states."""
    geometry = geometry_from_config(text, where, draft)
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
        sources={"geometry": f"declared: {given}; {config_source(text)}",
                 "weights": "declared: weight bytes given on the command line; parameters "
                            f"= bytes / {geometry.dtype} size",
                 "tokenizer": "declared: config.json vocab_size",
                 "download_bytes": "declared: the weight bytes"})


def bundled_declared(target: ArtifactLock, share_bytes: int | None, where: str,
                     draft_mode: Callable[[Geometry], Geometry]) -> ArtifactLock:
    """A bundled draft (MTP/NEXTN layers inside the target checkpoint): no download and no
    config of its own; its weights are part of the target's declared bytes.

    Their share is `share_bytes` when the author declares it (a model card's "14B MTP
    module"), else derived: where the config names the experts' format, each built-in MoE
    layer's experts in that format plus an even share of the rest, else the target's bytes
    split evenly over its decoder and built-in layers (which ignores embeddings and
    dense-vs-MoE layer sizes). DERIVED either way, and listed unconfirmed
    like every declared fact, so the gate (SP104) reports it until a hub lock reads the
    layers' own tensors."""
    g = draft_mode(target.geometry)  # the release's reading of the config (draft mode)
    geometry = bundled_geometry(g)
    total = target.weights.weight_bytes
    layers = g.num_nextn_predict_layers
    if share_bytes is not None and share_bytes >= total:
        raise SpecpairError.single(
            where, f"--draft-bytes {share_bytes} is not a share of --target-bytes {total}",
            "a bundled draft's tensors are inside the target checkpoint: declare the bytes of "
            "its layers (less than the target's), or leave --draft-bytes out")
    moe = target.geometry.moe
    if share_bytes is None and moe is not None and moe.bytes_per_param is not None:
        # each built-in layer is a MoE layer whose experts are stored like the target's:
        # those bytes follow from the config; the rest is split evenly as below
        per_layer = moe.experts * moe.expert_params * moe.bytes_per_param
        rest = total - moe.routed_params * moe.bytes_per_param
        estimate = layers * per_layer + rest * layers / (g.num_hidden_layers + layers)
        share = round(estimate / 2**20) * 2**20  # an estimate: whole MiB, no false digits
        how = (f"DERIVED: {layers} MoE layer(s) of {moe.experts} experts in "
               f"{moe.weight_format} (the config's expert layout), plus the target's other "
               f"declared bytes split evenly over its {g.num_hidden_layers} + {layers} "
               "layers (no share declared; `--draft-bytes N` declares it)")
    elif share_bytes is None:
        share = total * layers // (g.num_hidden_layers + layers)
        how = (f"DERIVED: the target's declared bytes split evenly over its "
               f"{g.num_hidden_layers} + {layers} layers (no share declared; "
               "`--draft-bytes N` declares it)")
    else:
        share, how = share_bytes, "declared: the bundled layers' bytes, given as --draft-bytes"
    dtype = TORCH_TO_SAFETENSORS.get(g.dtype.lower())
    params = {dtype: share // BYTES_PER[dtype]} if dtype else {}
    return target.model_copy(update={
        "geometry": geometry, "download_bytes": 0,
        "weights": Weights(params_by_dtype=params, weight_bytes=share, inside_target=True,
                           provenance="declared"),
        "unconfirmed": ["geometry", "weights.params_by_dtype", "weights.weight_bytes"],
        "sources": {"geometry": "declared: the target config's num_nextn_predict_layers "
                                "layers (one target layer each)",
                    "weights": f"inside the target's weights; {how}",
                    "tokenizer": "the target's",
                    "download_bytes": "none: the layers download with the target"}})


def declare(loaded: LoadedRunbook, target_config: Path, target_bytes: int,
            draft_config: Path | None, draft_bytes: int | None) -> Lock:
    rb = loaded.runbook
    where = str(loaded.document.path)
    target = declared_artifact(_source(rb.target), target_config, target_bytes)
    draft: ArtifactLock | None = None
    if rb.draft is not None and rb.draft.bundled:
        if draft_config is not None:
            raise SpecpairError.single(
                where, "the runbook's draft is bundled in the target: it has no config.json "
                "of its own", "leave --draft-config out; its layers are read from the "
                "target's config (num_nextn_predict_layers)")
        release = registry.get_release(rb.engine.name.value, rb.engine.version)
        assert release is not None, "rules.check_runbook refuses an unsupported release"
        draft = bundled_declared(target, draft_bytes, where, release.draft_mode)
    elif rb.draft is not None:
        if draft_config is None or draft_bytes is None:
            raise SpecpairError.single(
                where, "the runbook has a separate draft: declare its config and size",
                "add --draft-config PATH/config.json --draft-bytes N (from the draft's "
                "model card)")
        draft = declared_artifact(_source(rb.draft), draft_config, draft_bytes, draft=True)
    return Lock(pair=rb.pair.name, target=target, draft=draft)
