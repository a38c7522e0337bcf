"""Pieces of KV arithmetic that do not depend on the engine release."""

from __future__ import annotations

from specpair.engines.pair_input import EngineInput
from specpair.model.budget import Storage
from specpair.model.common import DTYPE_BYTES, KVDtype
from specpair.model.errors import Problem, SpecpairError
from specpair.model.geometry import Geometry
from specpair.model.memo import value_memo


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
    """Layers that keep per-token KV: full, sliding-window and chunked local attention."""
    return (geometry.full_attention_layers + geometry.sliding_window_layers
            + geometry.chunked_attention_layers)


def weights_per_rank(weight_bytes: int, replicated_bytes: int, shards: int) -> int:
    sharded = max(0, weight_bytes - replicated_bytes)
    return -(-sharded // shards) + replicated_bytes


def pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def storage(pair: EngineInput) -> Storage:
    return _storage(pair.target.download_bytes,
                    pair.draft.download_bytes if pair.draft else 0)


@value_memo  # of the two download sizes: one per pair, not one per planned variant
def _storage(t: int, d: int) -> Storage:
    return Storage(target_download_bytes=t, draft_download_bytes=d, total_download_bytes=t + d,
                   disk_needed_bytes=(t + d) * 11 // 10,
                   rule="lock download bytes (a bundled draft downloads with the target); "
                        "+10% for the hub cache's temporary files")


def _tp_problems(role: str, g: Geometry, ranks: int) -> list[str]:
    problems = []
    if g.num_attention_heads % ranks:
        problems.append(f"{role}: {g.num_attention_heads} attention heads do not split "
                        f"over {ranks} ranks")
    if g.attention == "mha":
        kv = g.num_key_value_heads
        if (kv >= ranks and kv % ranks) or (kv < ranks and ranks % kv):
            problems.append(f"{role}: {kv} KV heads neither split over nor replicate "
                            f"evenly onto {ranks} ranks")
    return problems


def valid_tp_sizes(geometries: list[Geometry], limit: int = 64) -> list[int]:
    """TP sizes up to `limit` that every model's heads accept."""
    return [t for t in range(1, limit + 1)
            if not any(_tp_problems("", g, t) for g in geometries)]


def check_tensor_parallel(pair: EngineInput, draft_tp: int | None = None, *,
                          with_draft: bool = True) -> None:
    """Head counts must split over the TP ranks (the engines assert it at start-up);
    `with_draft=False` judges the target alone (the server without its draft)."""
    tp = pair.runbook.deployment.parallel.tensor
    models = [("target", pair.target.geometry, tp, "deployment.parallel.tensor")]
    if pair.draft is not None and with_draft:
        models.append(("draft", pair.draft.geometry, draft_tp or tp,
                       "deployment.parallel.draft_tensor" if draft_tp
                       else "deployment.parallel.tensor"))
    problems = []
    for role, g, ranks, field in models:
        for message in _tp_problems(role, g, ranks):
            sizes = valid_tp_sizes([g])
            kv = f", {g.num_key_value_heads} KV heads" if g.attention == "mha" else ""
            hint = (f"use a tensor-parallel size the {role}'s {g.num_attention_heads} "
                    f"attention heads{kv} accept: " + ", ".join(map(str, sizes)))
            problems.append(Problem(pair.location(field), message, hint))
    if problems:
        raise SpecpairError(problems)
