"""Pieces of KV arithmetic that do not depend on the engine release."""

from __future__ import annotations

from specpair.budget.model import Storage
from specpair.errors import Location, Problem, SpecpairError
from specpair.geometry import Geometry
from specpair.resolve import ResolvedPair
from specpair.schema.common import DTYPE_BYTES, KVDtype


def model_dtype_bytes(geometry: Geometry) -> int:
    try:
        return DTYPE_BYTES[geometry.dtype.lower()]
    except KeyError:
        raise SpecpairError.single(
            "lock.json", f"unknown model dtype {geometry.dtype!r}",
            "declare geometry.dtype as bfloat16, float16 or float32",
            field_path="geometry.dtype") from None


def kv_bytes(kv: KVDtype | None, geometry: Geometry) -> int:
    """Bytes per KV element: an explicit dtype, else (`auto`) the model's dtype."""
    if kv is not None and kv.explicit_bytes is not None:
        return kv.explicit_bytes
    return model_dtype_bytes(geometry)


def kv_heads_per_rank(total_kv_heads: int, tp: int) -> int:
    """KV heads one rank holds; with fewer KV heads than ranks each rank keeps a copy."""
    return max(1, total_kv_heads // tp)


def kv_layers(geometry: Geometry) -> int:
    """Layers that keep per-token KV (sliding-window layers counted in full: conservative)."""
    return geometry.full_attention_layers + geometry.sliding_window_layers


def weights_per_rank(weight_bytes: int, replicated_bytes: int, shards: int) -> int:
    sharded = max(0, weight_bytes - replicated_bytes)
    return -(-sharded // shards) + replicated_bytes


def pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def storage(pair: ResolvedPair) -> Storage:
    t = pair.target.download_bytes
    d = pair.draft.download_bytes if pair.draft else 0
    return Storage(target_download_bytes=t, draft_download_bytes=d, total_download_bytes=t + d,
                   disk_needed_bytes=(t + d) * 11 // 10,
                   rule="lock download bytes (a bundled draft downloads with the target); "
                        "+10% for the hub cache's temporary files")


def check_tensor_parallel(pair: ResolvedPair, draft_tp: int | None = None) -> None:
    """Head counts must split over the TP ranks (the engines assert it at start-up)."""
    tp = pair.runbook.deployment.parallel.tensor
    problems = []
    models = [("target", pair.target.geometry, tp)]
    if pair.draft is not None:
        models.append(("draft", pair.draft.geometry, draft_tp or tp))
    for role, g, ranks in models:
        if g.num_attention_heads % ranks:
            problems.append(f"{role}: {g.num_attention_heads} attention heads do not split "
                            f"over {ranks} ranks")
        if g.attention == "mha":
            kv = g.num_key_value_heads
            if (kv >= ranks and kv % ranks) or (kv < ranks and ranks % kv):
                problems.append(f"{role}: {kv} KV heads neither split over nor replicate "
                                f"evenly onto {ranks} ranks")
    if problems:
        raise SpecpairError([Problem(Location(pair.source_file, 0, 0, "deployment.parallel.tensor"),
                                     message, "use a tensor-parallel size that divides the "
                                     "head counts (e.g. 1, 2, 4, 8 for 32 heads)")
                             for message in problems])
