"""`specpair bench` against vLLM 0.33.0: per-request acceptance comes with
--per-request-spec-decode-metrics (the launch sets it), so requests add nothing; the
per-position acceptance counter shows the draft tokens per step the server runs."""

from __future__ import annotations

from specpair.engines.bench_model import BenchProbe, GetJson
from specpair.engines.pair_input import EngineInput
from specpair.engines.vllm_0_33_0.args import server_args
from specpair.model.common import Method


def draft_positions(pair: EngineInput) -> int | None:
    if pair.runbook.speculation.method is Method.NGRAM:
        return None
    return server_args(pair, pair.gpu_spec).num_speculative_tokens


def check_server(pair: EngineInput, get: GetJson) -> None:
    """vLLM serves no report of its resolved speculative config (0.32.0 and 0.33.0)."""


# a replay compares answers token for token: vLLM returns the ids when asked
PROBE = BenchProbe(request_extras={}, replay_extras={"return_token_ids": True},
                   draft_positions=draft_positions,
                   check_server=check_server,
                   without_speculation_why=(
                       "vLLM 0.32.0, 0.33.0 and 0.34.0 have no per-request switch that turns "
                       "speculation off on a speculative server (SamplingParams, "
                       "vllm/sampling_params.py, has no such field; the V1 scheduler drafts "
                       "for every running request): compare with the target alone, `specpair "
                       "bench --against`"))
