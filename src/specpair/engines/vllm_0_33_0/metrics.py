"""vLLM 0.33.0 metrics (`vllm/v1/spec_decode/metrics.py` SpecDecodingProm,
`vllm/v1/metrics/loggers.py`). prometheus_client adds
`_total` to counters. The spec-decode counters are registered only when a speculative
config exists, so a server started without its draft has no such series at all."""

from __future__ import annotations

from specpair.engines.metrics_model import EngineMetrics
from specpair.engines.profile import EngineProfile
from specpair.engines.vllm_0_33_0.facts import PROFILE


def metrics(profile: EngineProfile) -> EngineMetrics:
    """The metrics of `profile`'s release: this one's, or another vLLM release's whose
    exporters are byte-identical to 0.33.0's (named with its own label)."""
    return EngineMetrics(
        engine=profile.label,
        generated_tokens="vllm:generation_tokens_total",
        verify_steps="vllm:spec_decode_num_drafts_total",
        accepted="vllm:spec_decode_num_accepted_tokens_total",
        running_requests="vllm:num_requests_running",
        kv_usage_fraction="vllm:kv_cache_usage_perc",
        kv_capacity_tokens=None,
        target_weights_gib=None,
        target_kv_gib=None,
        startup_seconds=None,
        # one API server uses prometheus_client's default registry, process collector included
        # (vllm/v1/metrics/prometheus.py get_prometheus_registry); several use the
        # multiprocess registry, which has no process metrics
        process_start="process_start_time_seconds",
        requests_done="vllm:request_success_total",
        tau_definition=("τ = 1 + rate(vllm:spec_decode_num_accepted_tokens_total) / "
                        "rate(vllm:spec_decode_num_drafts_total): accepted draft tokens per "
                        "(request, verify step) plus the bonus token, as SpecDecodingProm's "
                        "docstring defines the mean acceptance length"),
        per_request=(f"{profile.title} exports no per-request acceptance metric: per-request "
                     "acceptance is only in response bodies (`metrics.speculative_decoding."
                     "mean_acceptance_length`, with --per-request-spec-decode-metrics), which "
                     "`specpair bench` reads"),
        not_exported=("the KV token capacity as a number (only as a label of "
                      "vllm:cache_config_info)", "weight and KV pool bytes",
                      "the engine's start-up duration (the time to the first request after a "
                      "start is measured from the API process's start instead)"),
        source=f"{profile.label}: vllm/v1/spec_decode/metrics.py, vllm/v1/metrics/loggers.py",
        speculative_prefix="vllm:spec_decode",
        drafted="vllm:spec_decode_num_draft_tokens_total",
        accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos_total",
        process_metrics_with_data_parallel=False,
        # SpecDecodingProm's "Number of draft tokens": K per request per step, so its rate
        # over num_drafts' is the mean draft length in use (a schedule changes it with load)
        draft_depth=("tokens", "vllm:spec_decode_num_draft_tokens_total"),
    )


METRICS = metrics(PROFILE)
