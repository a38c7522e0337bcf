"""Base classes and small types shared by the runbook and lock models."""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints


class Strict(BaseModel):
    """Unknown keys are errors, values are immutable, NaN and infinity are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              use_enum_values=False, validate_default=True)


MAX_COUNT = 2**53
"""The largest whole number a runbook or lock may hold: exact as a float (the budget and
latency models compute in floats) and past any physical count (8 PiB in bytes, 9e15
parameters). Without a bound, 10**30 tokens overflowed float division in a dozen places."""
PositiveInt = Annotated[int, Field(gt=0, le=MAX_COUNT)]
NonNegativeInt = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")]
CommitSha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
RepoId = Annotated[str, StringConstraints(
    pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")]
UNSAFE_CHARS = r"\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
"""C0/C1 controls (ANSI and OSC escapes start with ESC or CSI) and the invisible and
bidirectional formatting characters (Trojan Source): they can hide or reorder text in a
terminal, a script or a review, so no runbook text may hold them."""
UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")


def inert(text: str) -> str:
    """Text for a terminal, a script or a page: each control or formatting character
    written as its escape (`\\x1b`, `\\u202e`), so it is seen and never acts. Records and
    file names are not validated like runbook text; everything printed passes here."""
    return UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


_UNSAFE_IN_TEXT = UNSAFE_CHARS.replace("\\x00-\\x1f", "\\x00-\\x08\\x0b-\\x1f")
"""The same, less tab and newline: multi-line text (a description, a prompt) keeps them."""

ArchitectureName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
"""A model class name as config.json's `architectures` lists it (a Python identifier)."""
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=200,
                                             pattern=rf"^[^{UNSAFE_CHARS}]*$")]
LongText = Annotated[str, StringConstraints(max_length=4000,
                                            pattern=rf"^[^{_UNSAFE_IN_TEXT}]*$")]
PromptText = Annotated[str, StringConstraints(min_length=1, max_length=2000,
                                              pattern=rf"^[^{_UNSAFE_IN_TEXT}]*$")]
LocalPath = Annotated[str, StringConstraints(
    min_length=1, max_length=1024, pattern=rf"^[^{UNSAFE_CHARS}-][^{UNSAFE_CHARS}]*$")]
"""A path that never becomes an option: a leading `-` (`--trust-remote-code`) would be
read by the engine as a flag; `./-name` says the same path."""

CLASS_LABEL = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
ClassLabel = Annotated[str, StringConstraints(pattern=CLASS_LABEL)]
"""A replay class label: it names a class in records, terminals and pages, so no markup or
control character can ride in it."""

UTC_TIME = "%Y-%m-%dT%H:%M:%SZ"
"""How records write when they started (`2026-12-01T10:05:00Z`)."""
CLOCK_SKEW = dt.timedelta(minutes=5)
"""How far ahead of this machine's clock a record's start may lie: the machine that wrote
it may run a little fast. Past that a record is refused, or it would stay "the latest" (and
the card, break-even and alerts would follow it) until time caught up."""


def utc_time(value: str) -> dt.datetime:
    """A record's UTC start, refused when malformed or in the future."""
    try:
        when = dt.datetime.strptime(value, UTC_TIME).replace(tzinfo=dt.UTC)
    except ValueError:
        raise ValueError(f"expected a UTC time written YYYY-MM-DDTHH:MM:SSZ, got "
                         f"{inert(value[:40])!r}") from None
    if when > dt.datetime.now(dt.UTC) + CLOCK_SKEW:
        raise ValueError(f"{value} is in the future: a record is written after its start "
                         "(is the recording machine's clock wrong?)")
    return when


def _past_utc(value: str) -> str:
    utc_time(value)
    return value


PastUtcTime = Annotated[str, AfterValidator(_past_utc)]
"""A record's start: the order of records is this time, not their file names."""


class Method(StrEnum):
    """Speculative methods across engines (the engine profile maps them to its names)."""

    EAGLE = "EAGLE"
    EAGLE3 = "EAGLE3"
    MTP = "MTP"
    """Built-in multi-token-prediction layers (SGLang calls it NEXTN, vLLM `mtp`)."""
    STANDALONE = "STANDALONE"
    DFLASH = "DFLASH"
    DSPARK = "DSPARK"
    NGRAM = "NGRAM"

    @property
    def is_block_drafter(self) -> bool:
        return self in (Method.DFLASH, Method.DSPARK)

    @property
    def is_eagle_family(self) -> bool:
        return self in (Method.EAGLE, Method.EAGLE3, Method.MTP, Method.STANDALONE)

    @property
    def needs_draft_model(self) -> bool:
        return self is not Method.NGRAM


class KVDtype(StrEnum):
    AUTO = "auto"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"

    @property
    def explicit_bytes(self) -> int | None:
        """Bytes per element, or None for `auto` (the model's dtype decides)."""
        return {KVDtype.AUTO: None, KVDtype.BF16: 2, KVDtype.FP16: 2,
                KVDtype.FP8_E4M3: 1, KVDtype.FP8_E5M2: 1}[self]


class WeightDtype(StrEnum):
    AUTO = "auto"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"
    FLOAT32 = "float32"


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "bf16": 2, "fp16": 2, "fp32": 4,
               "float8_e4m3fn": 1, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
