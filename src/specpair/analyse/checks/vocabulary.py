"""Rules about the two vocabularies: sizes, tokenizer files, and vLLM's heterogeneous
mode (its intersection, coverage and mapping)."""

from __future__ import annotations

from collections.abc import Iterator

from specpair.analyse.checks.artifacts import runbook_artifacts
from specpair.analyse.checks.gate import Context, rule
from specpair.model.common import Method


def _heterogeneous(ctx: Context) -> bool:
    """vLLM's heterogeneous-vocabulary mode: the engine maps the two vocabularies itself
    and skips its vocab-size check (vllm/config/speculative.py `_verify_args`)."""
    rb = ctx.pair.runbook
    return rb.speculation.heterogeneous_vocab and \
        "heterogeneous_vocab" in ctx.pair.release.profile.capabilities


@rule("SP201")
def _vocab(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is None or p.draft.bundled or _heterogeneous(ctx):
        return
    t, d = p.target.geometry, p.draft.geometry
    if t.vocab_size != d.vocab_size:
        yield (f"vocab sizes differ: target {t.vocab_size}, draft {d.vocab_size}",
               "draft", "use a draft trained on the target's tokenizer, or, on vLLM with "
               "method STANDALONE, set speculation.heterogeneous_vocab: true (greedy "
               "drafting on the tokens both vocabularies share)")
    if d.draft_vocab_size and d.draft_vocab_size < t.vocab_size and p.runbook.speculation.method \
            is not Method.EAGLE3:
        yield (f"reduced draft vocabulary ({d.draft_vocab_size}) on a "
               f"{p.runbook.speculation.method.value} draft", "draft",
               "reduced ('hot') vocabularies with a token map are an EAGLE-3 feature")
    if d.draft_vocab_size and d.draft_vocab_size > t.vocab_size:
        yield (f"draft_vocab_size {d.draft_vocab_size} is larger than the target vocabulary "
               f"({t.vocab_size}): the draft-to-target token map (d2t) would point past the "
               "target's embedding rows", "draft",
               f"use a draft whose draft_vocab_size is at most {t.vocab_size} (the draft "
               "trained for this target)")


@rule("SP202")
def _tokenizer(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is None or p.draft.bundled or _heterogeneous(ctx):
        return
    t, d = p.target.tokenizer.fingerprint, p.draft.tokenizer.fingerprint
    if t and d and t != d:
        yield (f"tokenizer fingerprints differ ({t[7:19]} vs {d[7:19]})", "draft",
               "drafts must share the target's tokenizer files, or, on vLLM with method "
               "STANDALONE, set speculation.heterogeneous_vocab: true")


COVERAGE_WARN_PCT = 50.0
"""specpair's threshold, not the engine's: below it the draft cannot propose half of the
target's tokens, and every target token outside the intersection is a certain rejection."""


@rule("SP203")
def _intersection(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if not _heterogeneous(ctx) or ctx.pair.draft is None:
        return
    m = ctx.pair.vocab_mapping
    if m is None:
        yield ("the lock has no vocabulary intersection for the heterogeneous mode",
               "speculation.heterogeneous_vocab",
               "run `specpair lock` with both checkpoints' tokenizer files at hand")
        return
    for role, locked in (("target", m.target_tokenizer), ("draft", m.draft_tokenizer)):
        art = getattr(ctx.pair, role)
        current = art.tokenizer.fingerprint if art is not None else None
        if locked and current and locked != current:
            yield (f"the intersection was computed from other {role} tokenizer files "
                   f"({locked[7:19]}, now {current[7:19]})", role,
                   "run `specpair lock` to compute it from the locked tokenizers")
    for role, fallback in (("target", m.target_fallback), ("draft", m.draft_fallback)):
        if fallback is None:
            yield (f"the {role} tokenizer has neither unk_token_id nor eos_token_id: vLLM's "
                   "VocabMapping refuses to start ('cannot safely map out-of-intersection "
                   "tokens')", role, f"set unk_token or eos_token in the {role}'s "
                   "tokenizer_config.json")
    if m.intersection == 0:
        yield ("the two vocabularies share no token after word-start normalisation",
               "draft", "use a draft whose tokenizer overlaps the target's")


@rule("SP204")
def _coverage(ctx: Context) -> Iterator[tuple[str, str, str]]:
    from specpair.lock.vocab import SMALL_INTERSECTION

    m = ctx.pair.vocab_mapping
    if not _heterogeneous(ctx) or m is None or m.intersection == 0:
        return
    if m.intersection < SMALL_INTERSECTION:
        yield (f"very small vocabulary intersection ({m.intersection} tokens; vLLM warns "
               f"below {SMALL_INTERSECTION})", "draft", "use a draft with a closer tokenizer")
    elif m.pct_of_target < COVERAGE_WARN_PCT:
        yield (f"the draft can propose only {m.intersection} of the target's "
               f"{m.target_vocab} tokens ({m.pct_of_target}%)", "draft",
               "measure acceptance on the service's traffic before relying on this pair")
    unmapped = sorted(k for k, ok in m.special_mapped.items() if not ok and " eos " in k)
    if unmapped:
        yield (f"{', '.join(unmapped)} has no draft counterpart: the draft never proposes "
               "the end of a sequence", "draft", "expect a rejection at every sequence end")


@rule("SP205")
def _mapping_note(ctx: Context) -> Iterator[tuple[str, str, str]]:
    m = ctx.pair.vocab_mapping
    if _heterogeneous(ctx) and m is not None:
        size = f"{m.intersection}" + (f"-{m.intersection_max}" if m.intersection_max else "")
        yield (f"VocabMapping: target_vocab={m.target_vocab}, draft_vocab={m.draft_vocab}, "
               f"intersection={size} ({m.pct_of_draft}% of draft, {m.pct_of_target}% of "
               "target)", "speculation.heterogeneous_vocab", "")


@rule("SP207")
def _mode_needed(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if not _heterogeneous(ctx) or p.draft is None:
        return
    t, d = p.target.tokenizer.fingerprint, p.draft.tokenizer.fingerprint
    if t and d and t == d:
        yield ("target and draft share their tokenizer files: the heterogeneous mode is not "
               "needed", "speculation.heterogeneous_vocab", "remove heterogeneous_vocab")


@rule("SP206")
def _mapping_revision(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if not _heterogeneous(ctx):
        return
    for role, art in runbook_artifacts(ctx):
        repo = getattr(art, "repo", None)
        if repo is not None:
            yield (f"{role} {repo}: the engine reads its tokenizer for the "
                   "vocabulary mapping from the default branch", f"{role}.repo",
                   "stage both checkpoints and serve them by path, or confirm the default "
                   "branch holds the locked tokenizer files")

