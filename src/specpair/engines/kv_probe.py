"""A question to a release's own KV sizing code: the engine-side script that answers it
(`specpair/engines/harness/`), its one case, and the figures specpair's port computes for
the same input, keyed as the script reports them. `specpair verify` runs it for a user's
pair in that release's own environment; what the engine answers decides."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from specpair.model.common import Strict


class KvProbe(Strict):
    release: str = Field(description="the release label, e.g. `vllm 0.34.0`")
    script: str = Field(description="the harness script's file name")
    case: dict[str, Any] = Field(description="what the script reads for one case")
    env: dict[str, str] = Field(default_factory=dict,
                                description="the launch's environment, which the engine "
                                            "reads while it parses the command")
    expected: dict[str, Any] = Field(description="specpair's figures for the same input")
    labels: dict[str, str] = Field(description="what each compared key is, for a reader")
    notes: list[str] = Field(default_factory=list,
                             description="what the engine's answer does not cover")
