"""What `specpair verify` prints: per pair, each figure specpair's port gives beside the
one the release's own code gives for the same input, and the verdict."""

from __future__ import annotations

import json
from typing import Any

from specpair.analyse.verify import Verification


def _value(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.6g}"
    return "—" if value is None else str(value)


def verdict(v: Verification) -> str:
    if v.engine_error is not None:
        return f"refused by {v.release}'s code"
    if v.confirmed:
        return f"confirmed by {v.release}'s code"
    return f"differs from {v.release}'s code: use the engine's figures"


def markdown(results: list[Verification]) -> str:
    out: list[str] = []
    for v in results:
        out += [f"## {v.pair} on {v.release}: {verdict(v)}", ""]
        if v.refused_by_specpair:
            out += [f"specpair's allowlist refuses this layout ({v.refused_by_specpair}); "
                    "the figures below are its release rules' beside the engine's.", ""]
        if v.engine_error is not None:
            out += [f"The engine's own error: {v.engine_error}", ""]
        if v.figures:
            out += ["| figure | specpair | engine | |", "|---|---:|---:|---|"]
            out += [f"| {f.label} | {_value(f.ours)} | {_value(f.engine)} | "
                    f"{'same' if f.agrees else 'DIFFERS'} |" for f in v.figures]
            out.append("")
        if v.method_support:
            out += [f"- {v.method_support}"]
        out += [f"- {note}" for note in v.notes]
        out += [f"- engine environment: {v.environment}", ""]
    confirmed = sum(v.confirmed for v in results)
    out.append(f"{confirmed} of {len(results)} pair(s) confirmed by their release's code")
    return "\n".join(out) + "\n"


def as_json(results: list[Verification]) -> str:
    return json.dumps([{**v.model_dump(mode="json"), "confirmed": v.confirmed,
                        "verdict": verdict(v)} for v in results], indent=2) + "\n"
