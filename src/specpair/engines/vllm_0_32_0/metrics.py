"""vLLM 0.32.0 metrics: 0.33.0's (`vllm/v1/spec_decode/metrics.py` and
`vllm/v1/metrics/loggers.py` are byte-identical in both wheels, facts.py COMPARED_WITH)."""

from __future__ import annotations

from specpair.engines.vllm_0_32_0.facts import PROFILE
from specpair.engines.vllm_0_33_0.metrics import metrics

METRICS = metrics(PROFILE)
