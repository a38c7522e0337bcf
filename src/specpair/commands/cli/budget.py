"""`specpair budget`: the two-model memory budget of one pair, with what-ifs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from specpair.commands.cli.common import (
    EXIT_OK,
    ROOT_HELP,
    UsageError,
    byte_count,
    fraction,
    one_pair,
    positive,
    root_of,
)
from specpair.model.errors import Location, Problem, SpecpairError

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def _gpu(text: str) -> str:
    """--gpu: a key of the GPU catalog; a typo is a usage error."""
    from specpair.facts import hardware

    if hardware.lookup(text) is None:
        raise argparse.ArgumentTypeError(f"unknown GPU {text!r}; {hardware.unknown_hint(text)}")
    return text


ONE_COMMAND = ("target", "draft", "engine", "method", "revision", "draft_revision",
               "target_bytes", "draft_bytes", "max_running_requests", "num_speculative_tokens",
               "block_size", "slo", "sets", "write_runbook")
"""Options of the budget without a runbook; given with RUNBOOK they are a usage error."""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "budget", help="the two-model memory budget of one pair, with what-ifs; or of two "
        "checkpoints without a runbook (--target … --draft …)",
        usage="%(prog)s RUNBOOK [--gpu KEY] [--tp N] [what-if options] [--json]\n"
              "       %(prog)s --target REPO_OR_DIR [--draft REPO_OR_DIR|bundled] --engine "
              "NAME==VERSION --method METHOD --gpu KEY --tp N [options] [--json] "
              "[--write-runbook DIR]")
    p.add_argument("runbook", nargs="?", help="runbook file (or use --target … instead)")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--gpu", type=_gpu, help="GPU catalog key, e.g. H100-80GB")
    p.add_argument("--tp", type=positive, help="tensor-parallel size")
    kv_choices = ["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]
    p.add_argument("--kv-dtype", choices=kv_choices, help="KV dtype of the target pool")
    p.add_argument("--draft-kv-dtype", choices=kv_choices, help="KV dtype of the draft pool")
    p.add_argument("--memory-fraction", type=fraction, help="memory fraction (0-1)")
    p.add_argument("--context-length", type=positive,
                   help="serving context length (without a runbook: default the target's "
                        "max_position_embeddings, as the engines default it)")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    one = p.add_argument_group("without a runbook", "a pair from two checkpoints: a hub "
                               "repository (range reads, as `specpair lock`) or a local "
                               "folder holding config.json")
    one.add_argument("--target", help="hub repository owner/name, or a checkpoint folder")
    one.add_argument("--draft", help="hub repository or folder of the draft; `bundled` for "
                                     "layers inside the target (MTP); none for NGRAM")
    one.add_argument("--engine", help="engine release, NAME==VERSION, e.g. sglang==0.5.23")
    one.add_argument("--method", help="speculative method, e.g. EAGLE3, MTP, DFLASH, NGRAM")
    one.add_argument("--revision", help="the target's hub revision (default main)")
    one.add_argument("--draft-revision", help="the draft's hub revision (default main)")
    one.add_argument("--target-bytes", type=byte_count,
                     help="the target's weight bytes, where the checkpoint has neither "
                          "safetensors files nor their index (declared, as `lock --declare`)")
    one.add_argument("--draft-bytes", type=byte_count, help="the draft's weight bytes")
    one.add_argument("--max-running-requests", type=positive, help="default: the engine's")
    one.add_argument("--num-speculative-tokens", type=positive, help="draft tokens per step")
    one.add_argument("--block-size", type=positive, help="block drafters (DFLASH, DSPARK)")
    one.add_argument("--slo", type=float, metavar="TAU",
                     help="acceptance length to evaluate at (TPOT, tokens/s, speedup)")
    one.add_argument("--set", dest="sets", action="append", default=[], metavar="FIELD=VALUE",
                     help="any other runbook field, e.g. --set speculation.topk=4 (repeatable)")
    one.add_argument("--offline", action="store_true",
                     help="ask no hub (also HF_HUB_OFFLINE=1); local folders still resolve")
    one.add_argument("--write-runbook", metavar="DIR",
                     help="write DIR/runbook.yaml and DIR/lock.json of this pair (pair name: "
                          "DIR's name); an existing different file is never overwritten")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    one_command = [f"--{k.replace('_', '-')}" for k in ONE_COMMAND if getattr(args, k)]
    if args.runbook is not None and one_command:
        raise UsageError("budget", f"RUNBOOK and {', '.join(one_command)} are two forms: "
                         "give a runbook file (what-ifs: --gpu, --tp, --kv-dtype, …), or "
                         "--target … without one")
    if args.runbook is None and not one_command:
        raise UsageError("budget", "give a runbook file, or --target REPO_OR_DIR --engine "
                         "NAME==VERSION --method METHOD --gpu KEY --tp N")
    if args.runbook is None:
        from specpair.commands.cli.budget_quick import handle_quick

        return handle_quick(args)
    return _handle_runbook(args)


def _handle_runbook(args: argparse.Namespace) -> int:
    import json

    from pydantic import ValidationError

    from specpair.analyse.budget import compute
    from specpair.commands.what_if import locate
    from specpair.generate.budget_files import markdown
    from specpair.load import rules
    from specpair.model.common import KVDtype

    pair = one_pair(root_of(args), args.runbook)
    rb = pair.runbook
    deployment = rb.deployment.model_dump()
    if args.gpu is not None:  # a catalog key: checked by the parser
        deployment["gpu"] = args.gpu
    if args.tp is not None:
        deployment["parallel"]["tensor"] = args.tp
    for flag, key in (("kv_dtype", "kv_cache_dtype"), ("draft_kv_dtype", "draft_kv_cache_dtype")):
        if getattr(args, flag) is not None:
            deployment[key] = KVDtype(getattr(args, flag))
    for key in ("memory_fraction", "context_length"):
        if getattr(args, key) is not None:
            deployment[key] = getattr(args, key)
    overrides = {f"--{flag.replace('_', '-')}": str(getattr(args, flag)) for flag in (
        "gpu", "tp", "kv_dtype", "draft_kv_dtype", "memory_fraction", "context_length")
        if getattr(args, flag) is not None}
    try:
        what_if = rb.model_validate({**rb.model_dump(), "deployment": deployment})
    except ValidationError as exc:
        raise SpecpairError(locate([Problem(Location("command line", 0, 0, ".".join(
            str(p) for p in e["loc"])), e["msg"], "change the option's value")
            for e in exc.errors(include_url=False)], set(overrides))) from None
    # the rules `validate` applies: a what-if the engine could not run is refused, not budgeted
    refused = rules.check_runbook(what_if, folder_name=pair.name)
    if refused:
        raise SpecpairError(locate([Problem(Location("command line", 0, 0, f.field),
                                            f.message, f.hint) for f in refused],
                                   set(overrides)))
    pair = pair.model_copy(update={"runbook": what_if, "gpu": deployment["gpu"]})
    try:
        result = compute(pair)
    except SpecpairError as exc:  # the option's value is refused, not the runbook's line
        raise SpecpairError(locate(exc.problems, set(overrides))) from None
    if args.json:
        data = result.model_dump(mode="json")
        if overrides:  # a what-if never passes for the committed budget.json
            data["what_if"] = overrides
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(markdown(pair, result, overrides), end="")
    return EXIT_OK
