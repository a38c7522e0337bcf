"""vLLM 0.34.0 metrics: 0.33.0's names (v1/spec_decode/metrics.py is byte-identical in both
wheels; v1/metrics/loggers.py differs only in the f-strings of its log prefixes,
facts.COMPARED_WITH), named with this release's label."""

from __future__ import annotations

from specpair.engines.vllm_0_33_0.metrics import metrics
from specpair.engines.vllm_0_34_0.facts import PROFILE

METRICS = metrics(PROFILE)
