"""Cold start of a two-model deployment, and the staging plan that bounds it.

    cold start = staging (download both pinned artifacts) + weight load (both, from local
                 disk) + graph capture + engine init + warmup

Each step belongs to one phase of the deployment log (staging_log.PHASES): staging,
engine_start (launch to /health: weight load, graph capture, engine init) and warmup, so
a recorded start compares with the model phase by phase (staging_calibration.py).

Staging modes:
- serial: one download after the other, in the plan's order: the sum of both;
- parallel-prestage: both downloads at once; each stream is limited by the per-stream
  bandwidth and together by the node's link, so the time approaches the slower artifact
  when streams, not the link, are the limit;
- engine-prefetch: no pre-staging: the engine reads shards from shared storage with its
  prefetch threads while it loads (SGLang --weight-loader-prefetch-checkpoints), so the
  read from storage is the load;
- engine-overlap: SGLang's overlapped loading, rejected with any speculative algorithm
  (pre-flight error), so no cold start is computed for it.

Graph capture, engine init and warmup are assumptions (the runbook can override them;
`specpair staging calibrate` derives them from recorded starts).
"""

from __future__ import annotations

from pydantic import Field

from specpair.model.common import Strict
from specpair.resolve.pair import ResolvedPair


class StagingStep(Strict):
    name: str
    seconds: float
    detail: str
    phase: str = Field(description="the deployment-log phase this step is part of")


class StagingPlan(Strict):
    mode: str
    order: list[str]
    artifacts: dict[str, int] = Field(description="download bytes per artifact")
    steps: list[StagingStep]
    cold_start_s: float
    budget_s: float
    fits: bool
    verdict: str
    unmodelled: list[str] = Field(default_factory=list, description="steps neither set nor "
                                  "calibrated, counted as 0 s: the verdict is then unknown "
                                  "until they are measured")
    alternatives: dict[str, float] = Field(description="cold start of each other mode")
    warmup: dict[str, object]


HF_DOWNLOAD_WORKERS = 8
"""`hf download --max-workers` in the generated staging script (huggingface_hub's default):
the files of one artifact download on that many connections at once."""


def download_seconds(sizes: list[int], *, parallel: bool, stream_bps: float,
                     link_bps: float, streams: int = 1) -> float:
    """Time to fetch all artifacts, serially or at once, each on `streams` connections
    (its files spread evenly over them: a sharded checkpoint)."""
    if not sizes:
        return 0.0
    if not parallel:
        return sum(_water_fill([s / streams] * streams, stream_bps, link_bps) for s in sizes)
    return _water_fill([s / streams for s in sizes for _ in range(streams)], stream_bps,
                       link_bps)


def _water_fill(parts: list[float], stream_bps: float, link_bps: float) -> float:
    # every stream runs at min(stream, link / active streams); the slowest finishes last
    remaining = sorted(float(s) for s in parts if s > 0)
    elapsed = 0.0
    while remaining:
        rate = min(stream_bps, link_bps / len(remaining))
        step = remaining[0] / rate
        elapsed += step
        remaining = [r - rate * step for r in remaining[1:]]
    return elapsed


def plan(pair: ResolvedPair, mode: str | None = None) -> StagingPlan:
    rb = pair.runbook
    st = rb.staging
    mode = mode or st.mode
    sizes = {"target": pair.target.download_bytes}
    if pair.draft is not None and not pair.draft.bundled:
        sizes["draft"] = pair.draft.download_bytes
    order = [role for role in st.order if role in sizes]
    stream, link, disk = (st.stream_bandwidth_bytes_per_s, st.network_bandwidth_bytes_per_s,
                          st.storage_bandwidth_bytes_per_s)
    total = sum(sizes.values())
    steps: list[StagingStep] = []
    if mode in ("serial", "parallel-prestage"):
        parallel = mode == "parallel-prestage"
        seconds = download_seconds([sizes[r] for r in order], parallel=parallel,
                                   stream_bps=stream, link_bps=link,
                                   streams=HF_DOWNLOAD_WORKERS)
        steps.append(StagingStep(
            name="stage", phase="staging", seconds=round(seconds, 1),
            detail=("both artifacts at once" if parallel else "in order " + " → ".join(order))
            + f", {HF_DOWNLOAD_WORKERS} streams each (hf download --max-workers "
            f"{HF_DOWNLOAD_WORKERS}; assumes sharded checkpoints, the lock holds no file "
            f"count), {stream / 1e9:g} GB/s per stream, {link / 1e9:g} GB/s link"))
        steps.append(StagingStep(name="load weights", phase="engine_start",
                                 seconds=round(total / disk, 1),
                                 detail=f"{total / 1e9:,.1f} GB from local disk at "
                                        f"{disk / 1e9:g} GB/s"))
    else:  # engine-prefetch (engine-overlap is refused with speculation before this)
        seconds = total / min(link, disk)
        steps.append(StagingStep(name="load weights (prefetched from storage)",
                                 phase="engine_start", seconds=round(seconds, 1),
                                 detail="no pre-staging: assumes both artifacts already sit on "
                                        "shared storage and stream from it while the engine "
                                        "loads"))
    graphs = rb.deployment.cuda_graphs  # off: the engines run eager and capture nothing
    steps.append(StagingStep(name="capture CUDA graphs", phase="engine_start",
                             seconds=st.graph_capture_s if graphs else 0.0,
                             detail="assumption: target and draft graphs" if graphs else
                             "none: deployment.cuda_graphs is false"))
    steps.append(StagingStep(name="engine init", phase="engine_start",
                             seconds=st.engine_init_s,
                             detail="assumption: process start, imports, compilation, memory "
                                    "profiling" + ("" if st.engine_init_s else
                                                   "; not modelled until set or calibrated")))
    steps.append(StagingStep(name="warmup request", phase="warmup", seconds=st.warmup_s,
                             detail=f"assumption; fails after {st.warmup.timeout_s:g} s"))
    cold = round(sum(s.seconds for s in steps), 1)
    fits = cold <= st.cold_start_budget_s
    unmodelled = [] if st.engine_init_s else ["engine init"]
    verdict = (f"cold start {cold:g} s {'within' if fits else 'over'} the budget of "
               f"{st.cold_start_budget_s:g} s")
    if unmodelled and fits:  # 0 s stands for a step nobody measured: no pass yet
        verdict = (f"unknown: measure; cold start {cold:g} s without "
                   f"{', '.join(unmodelled)} (not modelled), within the budget of "
                   f"{st.cold_start_budget_s:g} s; set staging.engine_init_s (a "
                   "deployment log ingested with `specpair staging ingest` measures it)")
    alternatives = {}
    if mode == st.mode:
        for other in ("serial", "parallel-prestage", "engine-prefetch"):
            if other != mode:
                alternatives[other] = plan(pair, other).cold_start_s
    return StagingPlan(
        mode=mode, order=order, artifacts=sizes, steps=steps, cold_start_s=cold,
        budget_s=st.cold_start_budget_s, fits=fits, verdict=verdict, unmodelled=unmodelled,
        alternatives=alternatives,
        warmup={"prompt": st.warmup.prompt, "max_tokens": st.warmup.max_tokens,
                "timeout_s": st.warmup.timeout_s})
