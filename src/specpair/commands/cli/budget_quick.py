"""`specpair budget --target … --draft …`: the command line of the budget without a
runbook (commands/quick_budget.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, UsageError

if TYPE_CHECKING:
    from specpair.commands.quick_budget import Flags

REQUIRED = ("target", "engine", "method", "gpu", "tp")


def flags_of(args: argparse.Namespace) -> Flags:
    from specpair.commands.quick_budget import Flags

    missing = [f"--{k}" for k in REQUIRED if getattr(args, k) is None]
    if missing:
        raise UsageError("budget", f"without a runbook {', '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} required: --target "
                         "REPO_OR_DIR [--draft REPO_OR_DIR|bundled] --engine NAME==VERSION "
                         "--method METHOD --gpu KEY --tp N")
    name = Path(args.write_runbook).resolve().name if args.write_runbook else None
    return Flags(target=args.target, engine=args.engine, method=args.method, gpu=args.gpu,
                 tp=args.tp, draft=args.draft, revision=args.revision,
                 draft_revision=args.draft_revision, kv_dtype=args.kv_dtype,
                 draft_kv_dtype=args.draft_kv_dtype, context_length=args.context_length,
                 memory_fraction=args.memory_fraction,
                 max_running_requests=args.max_running_requests,
                 num_speculative_tokens=args.num_speculative_tokens,
                 block_size=args.block_size, slo=args.slo, target_bytes=args.target_bytes,
                 draft_bytes=args.draft_bytes, sets=list(args.sets), name=name,
                 offline=args.offline)


def handle_quick(args: argparse.Namespace) -> int:
    from specpair.analyse.analysis import Analysis
    from specpair.analyse.budget import compute
    from specpair.commands.quick_budget import quick_pair, write_pair
    from specpair.generate.budget_files import break_even_data, markdown, not_served, served

    flags = flags_of(args)
    quick = quick_pair(flags)
    pair = quick.pair
    budget = compute(pair)  # what `specpair budget RUNBOOK` computes for the same pair
    analysis = Analysis(pair)
    at_slo = flags.slo is not None
    if args.json:
        data = budget.model_dump(mode="json")
        data["break_even"] = break_even_data(analysis, at_slo)
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        sources = ", ".join(f"{role} {art.source.repo or art.source.path}"
                            + (f"@{art.source.commit[:12]}" if art.source.commit else "")
                            + f" ({art.provenance})" for role, art in (
                                ("target", quick.lock.target), ("draft", quick.lock.draft))
                            if art is not None and not (role == "draft" and
                                                        art.weights.inside_target))
        origin = (f"Computed by `specpair budget` without a runbook, from {sources}; every "
                  "field the flags leave unset at a minimal runbook's default.")
        print(markdown(pair, budget, origin=origin)
              + (served(analysis.latency, at_slo) if analysis.not_modelled is None
                 else not_served(analysis.not_modelled)), end="")
    if args.write_runbook:
        written = write_pair(Path(args.write_runbook), quick)
        folder = args.write_runbook
        said = (f"wrote {', '.join(p.name for p in written)} to {folder}" if written else
                f"{folder} already holds this pair")
        print(f"{said}; `specpair build` there gives this budget", file=sys.stderr)
    return EXIT_OK
