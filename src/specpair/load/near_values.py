""""Did you mean" for a value outside a listed set (an engine name, a method): the words
users bring from elsewhere are an engine's own spelling ("SGLang", vLLM's `draft_model`,
SGLang's `NEXTN`), which a string distance alone misses."""

from __future__ import annotations

import difflib
import re
from typing import Any

from specpair.engines import engine_lists
from specpair.engines.registry import RELEASES, by_label, labels
from specpair.model.common import Method


def _engine_spellings(allowed: list[str]) -> dict[str, str]:
    """casefolded engine spelling → 'VALUE (ENGINE calls it SPELLING)', for the methods
    among `allowed` (each release's method_names)."""
    found: dict[str, str] = {}
    for release in RELEASES.values():
        for method, spelled in release.profile.method_names.items():
            if method.value in allowed and spelled != method.value:
                found.setdefault(spelled.casefold(), f"`{method.value}` "
                                 f"({release.profile.display_name} calls it {spelled})")
    return found


def _engine_methods(allowed: list[str]) -> dict[str, str]:
    """casefolded engine spelling → hint, for the methods some release accepts that are
    none of `allowed` (the method field's values): an MTP model type the release reads as
    its MTP method, or a method specpair does not model (each release's engine_lists.yaml
    `speculative_methods`, read from its code)."""
    if not any(method.value in allowed for method in Method):
        return {}
    unmodelled: dict[str, list[str]] = {}
    aliases: dict[str, list[str]] = {}
    for label in labels():
        lists = engine_lists.of(label)
        spelled = set(by_label(label).profile.method_names.values())
        for word in sorted(lists.speculative_methods - spelled):
            named = aliases if word in lists.mtp_aliases else unmodelled
            named.setdefault(word.casefold(), []).append(f"{label} (`{word}`)")
    hints = {word: f"did you mean `{Method.MTP.value}`? {', '.join(readers)} read it as "
                   "their MTP method" for word, readers in aliases.items()}
    for word, readers in unmodelled.items():
        verb = "accepts" if len(readers) == 1 else "accept"
        # an MTP alias of one release keeps its "did you mean" where another lacks it
        hints.setdefault(word, f"{', '.join(readers)} {verb} this method, but specpair "
                         "does not model it (its draft KV, gate rules and step cost): use "
                         "one of the listed methods, or serve it without specpair's budget")
    return hints


def listed_values(error: dict[str, Any]) -> list[str]:
    """The values a pydantic enum or literal error lists ("'a', 'b' or 'c'")."""
    return re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))


def did_you_mean(given: object, allowed: list[str]) -> str | None:
    """The listed value `given` most likely means, in a hint's words; None if none is near."""
    if not isinstance(given, str) or not allowed:
        return None
    folded = {value.casefold(): value for value in allowed}
    key = given.strip().casefold()
    if key in folded:  # a capitalised spelling: the schema's values are exact
        return f"did you mean `{folded[key]}`?"
    spelled = _engine_spellings(allowed).get(key)
    if spelled is not None:
        return f"did you mean {spelled}?"
    engine_method = _engine_methods(allowed).get(key)
    if engine_method is not None:
        return engine_method
    close = difflib.get_close_matches(key, list(folded), n=1, cutoff=0.6)
    return f"did you mean `{folded[close[0]]}`?" if close else None
