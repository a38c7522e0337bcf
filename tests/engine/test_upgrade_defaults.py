"""The defaults an SGLang upgrade changes, from the releases' own code (nox -s engines).

Each SGLang package declares how its release defaults the ratios specpair's commands may
leave unset (`args.DEFAULTS`: the parser's default, and the value the release runs with
when unset). Here each release's own code gives both, in one subprocess per release (the
KV-pool harnesses): its parser (`ServerArgs.add_cli_args`) the first, and its resolution,
as the pool code reads it, the second (`get_schedule()` after the server arguments are
published). The upgrade checklist
(`specpair impact`, upgrade.py) must then name each default the two releases reach
differently with those values and the budget each release computes.
"""

from __future__ import annotations

from typing import Any

from specpair.analyse.budget import compute
from specpair.analyse.upgrade import upgrade_items
from tests.engine import releases
from tests.engine.corpus import PAIRS, make_pair
from tests.engine.kv_cases import (
    REST_GIB,
    SGLANG_SCRIPTS,
    argv_for_engine,
    release_module,
    run_engine,
)

RATIOS = {"swa_full_tokens_ratio": "--swa-full-tokens-ratio",
          "mamba_full_memory_ratio": "--mamba-full-memory-ratio"}
# a hybrid sliding-window target and a linear-attention one: each uses one of the ratios
CORPUS = ("gpt-oss-120b-ngram", "qwen3-next-ngram")


def _unset(argv: list[str]) -> list[str]:
    """The command without the ratios, so that the release's defaults decide them."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in RATIOS.values():
            skip = True
        else:
            out.append(word)
    return out


def engine_defaults(release: str) -> dict[str, tuple[Any, Any]]:
    """ratio → (the parser's default, the value the release resolves when unset)."""
    build = release_module(release, "launch").build
    argvs = []
    for name in CORPUS:
        corpus = next(p for p in PAIRS if p.name == name)
        pair = make_pair(corpus, "sglang", releases.version(release), 2, "auto")
        assert pair is not None
        argvs.append(_unset([str(a) for a in build(pair).argv]))
    resolved = run_engine(SGLANG_SCRIPTS[release],
                          [{"argv": argv_for_engine(a), "rest_gib": REST_GIB} for a in argvs],
                          releases.env(release))
    assert all(r["ok"] for r in resolved), resolved
    found: dict[str, tuple[Any, Any]] = {}
    for ratio in RATIOS:
        parser = {r["parser_defaults"][ratio] for r in resolved}
        runs = {r[ratio] for r in resolved}
        assert len(parser) == 1 and len(runs) == 1, (release, ratio, parser, runs)
        found[ratio] = (parser.pop(), runs.pop())
    return found


def test_the_packages_defaults_are_the_releases_own_and_the_upgrade_names_them() -> None:
    engines = {release: engine_defaults(release) for release in releases.SGLANG}
    for release, found in engines.items():
        defaults = release_module(release, "args").DEFAULTS
        declared = {ratio: (getattr(defaults, ratio).parser, getattr(defaults, ratio).resolved)
                    for ratio in RATIOS}
        assert declared == found, (release, declared, found)
    # the upgrade of a hybrid-SWA pair names what the engines said, with both budgets
    old, new = releases.SGLANG[1], releases.SGLANG[0]  # 0.5.18 → 0.5.23
    corpus = next(p for p in PAIRS if p.name == "gpt-oss-120b-ngram")
    base, head = (make_pair(corpus, "sglang", releases.version(r), 2, "auto")
                  for r in (old, new))
    assert base is not None and head is not None
    items = upgrade_items(base, head)
    (line,) = [i for i in items if RATIOS["swa_full_tokens_ratio"] in i]
    (old_parser, old_run), (new_parser, new_run) = (
        engines[r]["swa_full_tokens_ratio"] for r in (old, new))
    assert old_parser != new_parser, (old_parser, new_parser)  # what makes it a change
    assert f"parser default {old_parser:g}" in line
    assert f"no parser default, resolved to {new_run:g}" in line
    capacity = [compute(p).speculative.max_total_tokens for p in (base, head)]  # type: ignore[union-attr]
    assert old_run == new_run and (f"both budgets run with {new_run:g} (KV token capacity "
                                   f"{capacity[0]:,} → {capacity[1]:,})") in line
