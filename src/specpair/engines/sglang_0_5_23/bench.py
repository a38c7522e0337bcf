"""`specpair bench` against SGLang 0.5.23: requests ask for `return_spec_tokens_details`
(per-request acceptance in `sglext`), and /server_info reports the resolved arguments."""

from __future__ import annotations

from typing import Any

from specpair.engines.bench_model import BenchProbe, FallbackError, GetJson
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23.args import verify_width
from specpair.engines.sglang_0_5_23.facts import PROFILE


def draft_positions(pair: EngineInput) -> int | None:
    return None  # no per-position counter


def check_server(pair: EngineInput, get: GetJson) -> None:
    rb = pair.runbook
    draft = rb.draft.repo or rb.draft.path if rb.draft and not rb.draft.bundled else None
    check_sglang_server_info(get("/server_info"),
                             algorithm=PROFILE.method_names[rb.speculation.method],
                             draft_tokens=verify_width(rb.speculation), draft_path=draft)


def check_sglang_server_info(info: dict[str, Any], *, algorithm: str, draft_tokens: int,
                             draft_path: str | None) -> None:
    """Compare SGLang's resolved args (/server_info) with what the runbook launches."""
    got = str(info.get("speculative_algorithm") or "")
    want = "EAGLE" if algorithm == "NEXTN" else algorithm
    if got.upper() != want:
        raise FallbackError(f"server runs speculative_algorithm={got or None}, runbook {want}")
    if int(info.get("speculative_num_draft_tokens") or 0) != draft_tokens:
        raise FallbackError(f"server verifies {info.get('speculative_num_draft_tokens')} tokens, "
                            f"runbook {draft_tokens}")
    if draft_path and info.get("speculative_draft_model_path") not in (draft_path, None):
        raise FallbackError(f"server drafts with {info.get('speculative_draft_model_path')}, "
                            f"runbook {draft_path}")


PROBE = BenchProbe(request_extras={"return_spec_tokens_details": True},
                   replay_extras={"return_spec_tokens_details": True},
                   draft_positions=draft_positions, check_server=check_server,
                   without_speculation_why=(
                       "SGLang has no per-request switch that turns speculation off on a "
                       "speculative server (SamplingParams, sglang/srt/sampling/"
                       "sampling_params.py, read in 0.5.18; 0.5.23 unverified): compare with "
                       "the target alone, `specpair bench --against`"))
