"""Resolving artifacts into lock facts, from a local directory or the Hugging Face Hub.

Nothing here downloads weights. From a local checkpoint the safetensors headers are read
(8-byte length + JSON), from the hub they are fetched with HTTP range requests through
huggingface_hub; config.json and the small tokenizer files are read whole.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from specpair.engines import engine_lists, registry
from specpair.model import hf_config
from specpair.model.config_geometry import NotModelled, from_hf_config
from specpair.model.errors import SpecpairError
from specpair.model.geometry import Geometry
from specpair.model.lock import (
    RESOLUTION_MAY_LEAVE_UNREAD,
    ArtifactLock,
    Source,
    Tokenizer,
    Weights,
)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json",
                   "merges.txt", "special_tokens_map.json", "added_tokens.json")
MAX_HEADER_BYTES = 100 << 20  # the safetensors format's own limit

# names of safetensors dtypes → bytes per element
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
                     "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2,
                     "U32": 4, "U64": 8, "F8_E8M0": 1, "F4": 1}


def engine_classes() -> hf_config.EngineClasses:
    """How the supported releases' own config registries read model types: a lock is
    read once for every release (each release's engine_lists.yaml `config_classes`)."""
    return engine_lists.config_classes(tuple(registry.labels()))


def geometry_from_config(text: str, where: str, draft: bool = False) -> Any:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecpairError.single(where, f"config.json is not valid JSON: {exc.msg}",
                                   "the checkpoint's config.json is corrupt",
                                   line=exc.lineno, column=exc.colno) from None
    if not isinstance(config, dict):
        raise SpecpairError.single(where, "config.json is not a JSON object",
                                   "the checkpoint's config.json is corrupt")
    try:
        return from_hf_config(config, engine_classes(), draft)
    except NotModelled as exc:
        raise SpecpairError.single(
            where, f"config.json: {exc}", f"specpair cannot budget this layout; the key "
            f"{exc.key!r} changes what the engine keeps per token or per request",
            field_path=exc.key) from None
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        if isinstance(exc, ValidationError):
            detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                               for e in exc.errors(include_url=False))
        raise SpecpairError.single(where, f"config.json does not describe a decoder: {detail}",
                                   "declare the geometry in the lock by hand, or fix the "
                                   "config") from None


def config_source(text: str) -> str:
    """Where the lock's geometry came from: the transformers class that read config.json,
    or that the file was read as written (its custom config code is never run)."""
    try:
        decoder = hf_config.read(json.loads(text), engine_classes())
    except (ValueError, TypeError, AttributeError):
        return "config.json"
    custom = " (ships custom config code: auto_map not run)" if decoder.custom_code and \
        decoder.config_class is None else ""
    return decoder.source + custom


def parse_safetensors_header(header: dict[str, Any]) -> tuple[dict[str, int], int]:
    """Parameter count per dtype and tensor bytes, from one file's header."""
    params: dict[str, int] = {}
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        params[dtype] = params.get(dtype, 0) + math.prod(info["shape"])
        start, end = info["data_offsets"]
        total += end - start
    return params, total


def read_local_header(path: Path) -> dict[str, Any]:
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) != 8:
            raise SpecpairError.single(path, "truncated safetensors file",
                                       "re-download the checkpoint")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES:
            raise SpecpairError.single(path, f"safetensors header of {length} bytes",
                                       "this is not a safetensors file")
        data = handle.read(length)
    try:
        header: dict[str, Any] = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SpecpairError.single(path, "unreadable safetensors header",
                                   "re-download the checkpoint") from None
    return header


def tokenizer_fingerprint(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return "sha256:" + digest.hexdigest()


def tokenizer_vocab(files: dict[str, bytes], fallback: int) -> int:
    """Tokens the tokenizer can produce (base vocabulary plus added tokens)."""
    if "tokenizer.json" in files:
        data = json.loads(files["tokenizer.json"])
        vocab = data.get("model", {}).get("vocab") or {}
        ids = set(vocab.values()) if isinstance(vocab, dict) else set(range(len(vocab)))
        ids |= {t["id"] for t in data.get("added_tokens", [])}
        if ids:
            return max(ids) + 1
    return fallback


class Checkpoint(Protocol):
    """Read access to one checkpoint revision: a local directory or a hub repo."""

    provenance: str
    source: Source
    where: str

    def files(self) -> dict[str, int]:
        """Every file of the revision with its size in bytes."""

    def read(self, name: str) -> bytes:
        """A small file, whole (config, tokenizer files, shard index)."""

    def headers(self) -> dict[str, dict[str, Any]]:
        """The safetensors header of every shard, without the tensor data."""


class LocalCheckpoint:
    def __init__(self, path: Path, display: str | None = None) -> None:
        self.root = path
        self.provenance = "local"
        self.source = Source(path=display or str(path))
        self.where = str(path)
        if not path.is_dir():
            raise SpecpairError.single(path, "the checkpoint directory does not exist",
                                       "fix `path:` or create the checkpoint")

    def files(self) -> dict[str, int]:
        return {str(f.relative_to(self.root)): f.stat().st_size
                for f in sorted(self.root.rglob("*"))
                if f.is_file() and not ({".git", ".cache"} & set(f.relative_to(self.root).parts))}

    def read(self, name: str) -> bytes:
        return (self.root / name).read_bytes()

    def headers(self) -> dict[str, dict[str, Any]]:
        return {f: read_local_header(self.root / f) for f in self.files()
                if f.endswith(".safetensors")}


INDEX = "model.safetensors.index.json"

# safetensors dtype names of the config's torch_dtype, for params derived from bytes
TORCH_TO_SAFETENSORS = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


def _index_total_size(ckpt: Checkpoint) -> int:
    """metadata.total_size of the shard index: the tensor bytes of every shard."""
    where = f"{ckpt.where}/{INDEX}"
    try:
        index = json.loads(ckpt.read(INDEX))
        total = index["metadata"]["total_size"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        raise SpecpairError.single(
            where, f"{INDEX} has no metadata.total_size",
            "use the index the checkpoint was published with, or the shards themselves, "
            "or write a declared lock: `specpair lock --declare`") from None
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        raise SpecpairError.single(where, f"metadata.total_size is {total!r}, not a byte count",
                                   "use the index the checkpoint was published with")
    return total


def _from_index(ckpt: Checkpoint, files: dict[str, int], geometry: Any,
                source: str = "config.json") -> ArtifactLock:
    """A checkpoint folder without its shards (air-gapped planning): weight bytes from the
    shard index; parameters per dtype follow from the config's dtype and are listed as
    unconfirmed, since only the shards' headers state them."""
    total = _index_total_size(ckpt)
    dtype = TORCH_TO_SAFETENSORS.get(geometry.dtype.lower())
    per = {"BF16": 2, "F16": 2, "F32": 4}
    params = {dtype: total // per[dtype]} if dtype else {}
    tok_files = {name: ckpt.read(name) for name in TOKENIZER_FILES if name in files}
    unread = ["weights.params_by_dtype"] + ([] if tok_files else ["tokenizer"])
    assert RESOLUTION_MAY_LEAVE_UNREAD.issuperset(unread)
    return ArtifactLock(
        source=ckpt.source, provenance=ckpt.provenance, geometry=geometry,
        weights=Weights(params_by_dtype=params, weight_bytes=total, provenance=ckpt.provenance),
        download_bytes=total + sum(files.values()),
        tokenizer=Tokenizer(
            fingerprint=tokenizer_fingerprint(tok_files) if tok_files else None,
            vocab_size=tokenizer_vocab(tok_files, geometry.vocab_size),
            files=sorted(tok_files), provenance=ckpt.provenance),
        unconfirmed=unread,
        sources={"geometry": source, "weights": f"{INDEX} metadata.total_size; "
                 f"parameters = bytes / {geometry.dtype} size",
                 "tokenizer": "tokenizer files" if tok_files else "config.json vocab_size",
                 "download_bytes": f"{INDEX} total_size + file listing"})


def resolve_checkpoint(ckpt: Checkpoint, draft: bool = False
                       ) -> tuple[ArtifactLock, dict[str, dict[str, Any]]]:
    """Lock facts of one checkpoint; the headers are empty when only the shard index
    was there (then a bundled draft cannot be separated from the target)."""
    files = ckpt.files()
    if "config.json" not in files:
        raise SpecpairError.single(ckpt.where, "no config.json in the checkpoint",
                                   "point at a Hugging Face style checkpoint")
    text = ckpt.read("config.json").decode("utf-8", "replace")
    geometry = geometry_from_config(text, f"{ckpt.where}/config.json", draft)
    source = config_source(text)
    if not any(f.endswith(".safetensors") for f in files):
        if INDEX in files:
            return _from_index(ckpt, files, geometry, source), {}
        raise SpecpairError.single(
            ckpt.where, f"no .safetensors files and no {INDEX} in the checkpoint",
            "specpair reads weight bytes from safetensors headers or the shard index; copy "
            f"{INDEX} next to config.json, or write a declared lock: `specpair lock "
            "--declare RUNBOOK --target-config …/config.json --target-bytes N`")
    headers = ckpt.headers()
    params: dict[str, int] = {}
    weight_bytes = 0
    for name in sorted(headers):
        p, b = parse_safetensors_header(headers[name])
        for dtype, n in p.items():
            params[dtype] = params.get(dtype, 0) + n
        weight_bytes += b
    tok_files = {name: ckpt.read(name) for name in TOKENIZER_FILES if name in files}
    lock = ArtifactLock(
        source=ckpt.source, provenance=ckpt.provenance, geometry=geometry,
        weights=Weights(params_by_dtype=dict(sorted(params.items())), weight_bytes=weight_bytes,
                        provenance=ckpt.provenance),
        download_bytes=sum(files.values()),
        tokenizer=Tokenizer(
            fingerprint=tokenizer_fingerprint(tok_files) if tok_files else None,
            vocab_size=tokenizer_vocab(tok_files, geometry.vocab_size),
            files=sorted(tok_files), provenance=ckpt.provenance),
        sources={"geometry": source, "weights": "safetensors headers",
                 "tokenizer": "tokenizer files", "download_bytes": "file listing"})
    return lock, headers


# --------------------------------------------------------------------------- bundled drafts

_LAYER = __import__("re").compile(r"(?:^|\.)layers\.(\d+)\.")


def bundled_geometry(g: Geometry) -> Geometry:
    """One target layer per `num_nextn_predict_layers`: the built-in draft's geometry."""
    layers = g.num_nextn_predict_layers
    if not layers:
        raise SpecpairError.single(
            "lock", "the target config declares no built-in draft layers "
            "(num_nextn_predict_layers is 0)", "name a separate draft checkpoint")
    return g.model_copy(update={
        "num_hidden_layers": layers, "full_attention_layers": layers, "layers": None,
        "sliding_window_layers": 0, "chunked_attention_layers": 0, "linear_attention": None,
        "moe": g.moe.model_copy(update={"moe_layers": layers}) if g.moe else None,
        "architecture": f"{g.architecture} (built-in MTP layers)"})


def bundled_draft(target: ArtifactLock, headers: dict[str, dict[str, Any]],
                  draft_mode: Callable[[Geometry], Geometry]) -> ArtifactLock:
    """The draft that lives inside the target checkpoint (MTP/NEXTN layers).

    Its geometry is one target layer per `num_nextn_predict_layers` of the target's config
    as the engine release reads it in draft mode (`EngineRelease.draft_mode`); its weights
    are the tensors of the layers numbered past the decoder's `num_hidden_layers`.
    """
    geometry = bundled_geometry(draft_mode(target.geometry))
    g = target.geometry
    params: dict[str, int] = {}
    weight_bytes = 0
    for _, header in sorted(headers.items()):
        extra = {name: info for name, info in header.items() if name != "__metadata__"
                 and (m := _LAYER.search(name)) and int(m.group(1)) >= g.num_hidden_layers}
        p, b = parse_safetensors_header(extra)
        for dtype, n in p.items():
            params[dtype] = params.get(dtype, 0) + n
        weight_bytes += b
    return target.model_copy(update={
        "geometry": geometry, "download_bytes": 0,
        "weights": Weights(params_by_dtype=dict(sorted(params.items())),
                           weight_bytes=weight_bytes, inside_target=True,
                           provenance=target.provenance),
        "sources": {**target.sources, "geometry": "target config, num_nextn_predict_layers",
                    "weights": "tensors of layers past num_hidden_layers"}})
