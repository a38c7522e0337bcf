"""`specpair bench` against SGLang 0.5.23: requests ask for `return_spec_tokens_details`
(per-request acceptance in `sglext`), and /server_info reports the resolved arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specpair.bench.metrics import check_sglang_server_info
from specpair.engines.bench_model import BenchProbe, GetJson
from specpair.engines.sglang_0_5_23.args import verify_width
from specpair.engines.sglang_0_5_23.facts import PROFILE

if TYPE_CHECKING:  # annotations only: resolve sits above the engine registry
    from specpair.resolve.pair import ResolvedPair


def draft_positions(pair: ResolvedPair) -> int | None:
    return None  # no per-position counter


def check_server(pair: ResolvedPair, get: GetJson) -> None:
    rb = pair.runbook
    draft = rb.draft.repo or rb.draft.path if rb.draft and not rb.draft.bundled else None
    check_sglang_server_info(get("/server_info"),
                             algorithm=PROFILE.method_names[rb.speculation.method],
                             draft_tokens=verify_width(rb.speculation), draft_path=draft)


PROBE = BenchProbe(request_extras={"return_spec_tokens_details": True},
                   replay_extras={"return_spec_tokens_details": True},
                   draft_positions=draft_positions, check_server=check_server)
