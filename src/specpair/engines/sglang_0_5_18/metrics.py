"""SGLang 0.5.18 metrics: the names 0.5.23's package uses, each declared in 0.5.18's own
`srt/observability/metrics_collector.py` (tests/engine/test_metrics_rules.py)."""

from __future__ import annotations

from dataclasses import replace

from specpair.engines.sglang_0_5_18.facts import PROFILE
from specpair.engines.sglang_0_5_23 import metrics as base

METRICS = replace(
    base.METRICS, engine=PROFILE.label,
    per_request=base.METRICS.per_request.replace("SGLang 0.5.23", PROFILE.title),
    source=f"{PROFILE.label}: srt/observability/metrics_collector.py, "
           "srt/observability/startup_time.py")
