"""A lock's engine verdict for a pair, answering the pair's own question.

A stand-in answer: no engine runs in the tests session, so the engine's figures are set
here to specpair's own (or one lower where `differs`). What is tested with it is the
build's handling of a recorded answer; tests/engine/test_verify.py records real ones
from the releases' own code."""

from __future__ import annotations

from specpair.analyse.engine_verdict import ask, question
from specpair.model.lock import EngineVerdict
from specpair.resolve.pair import ResolvedPair


def engine_answered(pair: ResolvedPair, differs: bool = False) -> ResolvedPair:
    """`pair` with a verdict for the question its budget (by the release's rules alone,
    the allowlist aside) asks."""
    asked = ask(pair, pair.release.budget(pair, pair.gpu_spec))
    assert asked is not None
    figures = dict(asked.expected)
    if differs:
        key = next(k for k, v in figures.items() if isinstance(v, int) and v > 0)
        figures[key] = int(figures[key] or 0) - 1
    return pair.model_copy(update={"engine_verdict": EngineVerdict(
        release=pair.engine, provenance=f"engine {pair.engine}", question=question(asked),
        figures=figures, specpair=dict(asked.expected), labels=asked.labels)})
