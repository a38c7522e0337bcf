"""`specpair verify`: each pair's KV sizing put to its pinned release's own code, in that
release's environment (`specpair.engines.engine_run`), and judged there
(`specpair.analyse.verify`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from specpair.analyse import verify
from specpair.commands.build import load_pairs
from specpair.engines import engine_run
from specpair.lock.configs import config_folder
from specpair.model.common import Method
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair
from specpair.write import case_files


def folders(pair: ResolvedPair, target_config: str | None, draft_config: str | None,
            offline: bool) -> dict[str, Path]:
    """The config folders the engine reads: the target's, and a separate draft's."""
    rb = pair.runbook
    found = {"target": config_folder("target", rb.target, pair.target.source, target_config,
                                     offline)}
    draft = pair.draft
    if rb.draft is not None and draft is not None and not draft.bundled \
            and rb.speculation.method is not Method.NGRAM:
        found["draft"] = config_folder("draft", rb.draft, draft.source, draft_config, offline)
    return found


def run(root: Path, paths: list[Path], engine_python: str | None,
        target_config: str | None = None, draft_config: str | None = None,
        offline: bool = False) -> list[verify.Verification]:
    pairs = load_pairs(root, paths)
    if (target_config or draft_config) and len(pairs) != 1:
        raise SpecpairError.single("--target-config/--draft-config", f"{len(pairs)} pairs "
                                   "given: a config file names one pair's checkpoint",
                                   "verify that one runbook alone")
    asked: dict[str, list[tuple[ResolvedPair, verify.Asked]]] = {}
    for pair in pairs:
        question = verify.probe(pair, folders(pair, target_config, draft_config, offline))
        asked.setdefault(question.probe.release, []).append((pair, question))
    results: list[verify.Verification] = []
    for release, items in asked.items():
        env = engine_run.environment(release, engine_python,
                                     None if engine_run.named_interpreter(engine_python)
                                     else cached_environment(release, offline))
        with case_files.written([question.probe for _, question in items]) as probes:
            answers = engine_run.run(env, probes)
        results += [verify.judge(pair, question, answer, env.described)
                    for (pair, question), answer in zip(items, answers, strict=True)]
    return sorted(results, key=lambda v: v.pair)


def cached_environment(release: str, offline: bool) -> tuple[Path, Path | None]:
    """The release's environment from specpair's cache, created there on first use."""
    from specpair.write import engine_environments

    def say(text: str) -> None:
        print(f"specpair verify: {text}", file=sys.stderr, flush=True)

    named_folder = bool(os.environ.get(engine_run.variable(release)))
    try:
        return engine_environments.prepare(release, offline, say, with_folder=not named_folder)
    except engine_environments.SetupFailed as failed:
        raise SpecpairError.single(failed.where, failed.problem, failed.fix) from None


def record(root: Path, results: list[verify.Verification]) -> list[str]:
    """Each answered pair's verdict into its lock (`--record`); the locks written."""
    from specpair.commands.lock import record_verdict

    written = []
    for result in results:
        if result.engine_error is not None:
            continue  # nothing answered, nothing recorded
        folder = (root / result.source_file).parent
        if record_verdict(folder, verify.as_verdict(result)):
            written.append(str(Path(result.source_file).parent / "lock.json"))
    return written
