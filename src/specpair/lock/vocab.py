"""The token-level intersection of two vocabularies, computed as vLLM 0.33.0 computes it.

vLLM's heterogeneous-vocabulary mode (`use_heterogeneous_vocab`, Token-Level Intersection)
builds `VocabMapping` at start-up (vllm/v1/spec_decode/vocab_mapping.py), from the
target's tokenizer and the draft's own (vllm/v1/spec_decode/draft_model.py):

1. `_detect_space_prefix`: encode " a" without special tokens; if the first token is
   longer than one character, ends with "a" and does not start with a space or tab, its
   head is the tokenizer's word-start marker (BPE 'Ġ', SentencePiece '▁'); otherwise both
   markers ('Ġ', '▁') are tried.
2. `_normalize_token`: a token that starts with a marker gets it replaced by one space.
   The first token (in `get_vocab()` order) that normalises to a string keeps it.
3. The intersection is the normalised strings in both vocabularies whose ids lie below
   each model's config `vocab_size` (`get_vocab_size()`); its size is the number of
   draft ids marked in `intersection_mask_draft`. It logs "VocabMapping initialized:
   target_vocab=…, draft_vocab=…, intersection=… (x% of draft, y% of target)" and warns
   below `SMALL_INTERSECTION` tokens; it never refuses a small one.
4. `_get_unk_token_id`: ids outside the intersection map to the tokenizer's
   `unk_token_id`, else its `eos_token_id` (with a warning), else ValueError: the engine
   refuses to start.

Tokenizers are read from `tokenizer.json` with the `tokenizers` library (the Rust
tokenizer that transformers' fast tokenizers wrap), special tokens from
`tokenizer_config.json`, then `special_tokens_map.json`, as transformers reads them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from specpair.model.errors import SpecpairError
from specpair.model.lock import Fallback, VocabMapping

BPE_MARKER = "\u0120"  # 'Ġ'
SENTENCEPIECE_MARKER = "\u2581"  # '▁'
FALLBACK_MARKERS = (BPE_MARKER, SENTENCEPIECE_MARKER)
SMALL_INTERSECTION = 100  # VocabMapping warns "Very small vocabulary intersection" below it
SPECIAL_ROLES = ("unk", "eos", "bos", "pad")


@dataclass(frozen=True)
class TokenizerFacts:
    """What the mode reads from one tokenizer."""

    vocab: dict[str, int]
    markers: tuple[str, ...]
    probed: bool
    """True: the probe found the marker; False: the engine's fallback (both markers)."""
    special: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    """role (unk, eos, bos, pad) → (token, id or None when the vocabulary lacks it)."""

    def special_id(self, role: str) -> int | None:
        return self.special[role][1] if role in self.special else None

    @property
    def fallback(self) -> tuple[Literal["unk", "eos"], int] | None:
        """`_get_unk_token_id`: unk, else eos, else none (the engine raises)."""
        for role in ("unk", "eos"):
            token_id = self.special_id(role)
            if token_id is not None:
                return ("unk" if role == "unk" else "eos"), token_id
        return None


@dataclass(frozen=True)
class Intersection:
    target_vocab: int
    draft_vocab: int
    size: int
    size_max: int
    """Equal to `size` unless tokens that normalise alike straddle a vocab bound, when the
    engine's count depends on its dictionary order (then: the range)."""
    target_fallback: tuple[Literal["unk", "eos"], int] | None
    draft_fallback: tuple[Literal["unk", "eos"], int] | None
    special_mapped: dict[str, bool]
    """'target eos <tok>' → whether the target's special token has a draft counterpart."""
    target_markers: tuple[str, ...]
    draft_markers: tuple[str, ...]

    @property
    def pct_of_draft(self) -> float:
        return round(100.0 * self.size / max(self.draft_vocab, 1), 1)

    @property
    def pct_of_target(self) -> float:
        return round(100.0 * self.size / max(self.target_vocab, 1), 1)

    @property
    def refusal(self) -> str | None:
        """Why the engine would refuse to start, if it would."""
        for role, fb in (("target", self.target_fallback), ("draft", self.draft_fallback)):
            if fb is None:
                return (f"VocabMapping: {role} tokenizer has neither unk_token_id nor "
                        "eos_token_id; cannot safely map out-of-intersection tokens")
        return None


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def load_tokenizer(files: dict[str, bytes], where: str) -> TokenizerFacts:
    """The facts of one tokenizer from its files (tokenizer.json is required)."""
    from tokenizers import Tokenizer  # the lock and the tests only

    if "tokenizer.json" not in files:
        raise SpecpairError.single(
            where, "no tokenizer.json: the vocabulary intersection needs the fast tokenizer",
            "add the checkpoint's tokenizer.json (transformers writes it with "
            "save_pretrained), or declare the intersection in the lock")
    try:
        tok = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
    except Exception as exc:  # the Rust loader raises plain Exception
        raise SpecpairError.single(where, f"tokenizer.json does not load: {exc}",
                                   "re-download the checkpoint's tokenizer files") from None
    vocab: dict[str, int] = tok.get_vocab(with_added_tokens=True)
    markers, probed = detect_markers(tok)
    config: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # config wins
        if name in files:
            try:
                data = json.loads(files[name])
            except json.JSONDecodeError as exc:
                raise SpecpairError.single(f"{where}/{name}", f"not valid JSON: {exc.msg}",
                                           "re-download the tokenizer files") from None
            if isinstance(data, dict):
                config.update({k: v for k, v in data.items() if v is not None})
    special: dict[str, tuple[str, int | None]] = {}
    for role in SPECIAL_ROLES:
        text = _token_text(config.get(f"{role}_token"))
        if text is not None:
            special[role] = (text, tok.token_to_id(text))
    return TokenizerFacts(vocab=vocab, markers=markers, probed=probed, special=special)


def detect_markers(tok: Any) -> tuple[tuple[str, ...], bool]:
    """`_detect_space_prefix`: the word-start marker the tokenizer puts on " a"."""
    try:
        ids = tok.encode(" a", add_special_tokens=False).ids
        if ids:
            text = tok.id_to_token(ids[0])
            if isinstance(text, str) and len(text) > 1 and text.endswith("a") and \
                    text[0] not in (" ", "\t"):
                return (text[:-1],), True
    except Exception:
        pass
    return FALLBACK_MARKERS, False


def normalize(token: str, markers: tuple[str, ...]) -> str:
    """`_normalize_token`: the first matching marker becomes one space."""
    for marker in markers:
        if token.startswith(marker):
            return " " + token[len(marker):]
    return token


def _normalized(facts: TokenizerFacts) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for token, token_id in facts.vocab.items():
        found.setdefault(normalize(token, facts.markers), []).append(token_id)
    return found


def intersect(target: TokenizerFacts, draft: TokenizerFacts, target_vocab: int,
              draft_vocab: int) -> Intersection:
    """`VocabMapping.__init__`: the intersection's size, as the engine logs it."""
    t_norm, d_norm = _normalized(target), _normalized(draft)
    low = high = 0
    for norm in t_norm.keys() & d_norm.keys():
        # the engine keeps the first id in dict order; which one that is only matters
        # when the candidates fall on both sides of a vocab bound
        fits = [t < target_vocab and d < draft_vocab for t in t_norm[norm] for d in d_norm[norm]]
        low += all(fits)
        high += any(fits)
    d_lookup = {norm: ids for norm, ids in d_norm.items()}
    mapped: dict[str, bool] = {}
    for role in SPECIAL_ROLES:
        if role in target.special:
            text, token_id = target.special[role]
            norm = normalize(text, target.markers)
            mapped[f"target {role} {text}"] = token_id is not None and any(
                d < draft_vocab for d in d_lookup.get(norm, []))
    return Intersection(target_vocab=target_vocab, draft_vocab=draft_vocab, size=low,
                        size_max=high, target_fallback=target.fallback,
                        draft_fallback=draft.fallback, special_mapped=mapped,
                        target_markers=target.markers, draft_markers=draft.markers)


def to_lock(found: Intersection, provenance: str) -> VocabMapping:
    """The lock section of an intersection."""

    def fallback(fb: tuple[Literal["unk", "eos"], int] | None) -> Fallback | None:
        return None if fb is None else Fallback(kind=fb[0], token_id=fb[1])

    return VocabMapping(
        target_vocab=found.target_vocab, draft_vocab=found.draft_vocab,
        intersection=found.size,
        intersection_max=found.size_max if found.size_max != found.size else None,
        target_markers=list(found.target_markers), draft_markers=list(found.draft_markers),
        target_fallback=fallback(found.target_fallback),
        draft_fallback=fallback(found.draft_fallback),
        special_mapped=dict(sorted(found.special_mapped.items())), provenance=provenance)
