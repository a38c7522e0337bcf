"""The timing the device measurements share: CUDA events around each call, the median of
`repeats`, L2 flushed before each by writing a buffer larger than it; and a callable
captured once as a CUDA graph, so launch overhead is that of one graph replay."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch


def timed(fn: Callable[[], object], flush: torch.Tensor, repeats: int = 30) -> float:
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(repeats):
        flush.zero_()  # evict the operands from L2 (60 MB on an H200)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    for _ in range(3):
        fn()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay
