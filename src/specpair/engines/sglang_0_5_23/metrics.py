"""SGLang 0.5.23 metrics, served with --enable-metrics (sglang 0.5.23:
`srt/observability/metrics_collector.py`). `spec_verify_calls_total`
and `generation_tokens_total` grow when a request finishes, by its verify count and its
completion tokens; the verify counter's series appears with the first speculative request,
so a server that lost its draft has none."""

from __future__ import annotations

from specpair.engines.metrics_model import EngineMetrics

METRICS = EngineMetrics(
    engine="sglang 0.5.23",
    generated_tokens="sglang:generation_tokens_total",
    verify_steps="sglang:spec_verify_calls_total",
    accepted=None,
    running_requests="sglang:num_running_reqs",
    kv_usage_fraction="sglang:token_usage",
    kv_capacity_tokens="sglang:max_total_num_tokens",
    target_weights_gib="sglang:weight_memory_usage_gb",
    target_kv_gib="sglang:kv_cache_memory_usage_gb",
    startup_seconds=("sglang:startup_time_seconds", 'phase="tokenizer_e2e"'),
    # metrics come from prometheus_client's multiprocess registry: no process collector
    process_start=None,
    requests_done=None,
    tau_definition=("τ = rate(sglang:generation_tokens_total) / "
                    "rate(sglang:spec_verify_calls_total): completion tokens per verify "
                    "forward, bonus token included, as SGLang's spec_accept_length "
                    "(completion_tokens / spec_verify_ct); both counters grow at request "
                    "finish, so windows must outlast a request"),
    per_request=("SGLang 0.5.23 exports no per-request acceptance metric: "
                 "`sglang:spec_accept_length` is a gauge per decode-log interval of the "
                 "whole batch; per-request acceptance is only in responses "
                 "(`sglext.spec_tokens_details.spec_accept_length` with "
                 "return_spec_tokens_details), which `specpair bench` reads"),
    not_exported=("the draft's own KV pool and weights (kv_cache_memory_usage_gb and "
                  "weight_memory_usage_gb are the target's)",),
    source="sglang 0.5.23: srt/observability/metrics_collector.py, "
           "srt/observability/startup_time.py",
    speculative_prefix="sglang:spec_",
    # "Currently active speculative_num_steps." (metrics_collector.py), which the adaptive
    # controller changes (adaptive_spec_params.py)
    draft_depth=("gauge", "sglang:spec_num_steps"),
)
