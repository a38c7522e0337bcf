"""`specpair budget`: the two-model memory budget of one pair, with what-ifs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from specpair.commands.cli.common import EXIT_OK, ROOT_HELP, fraction, one_pair, positive, root_of
from specpair.model.errors import Location, Problem, SpecpairError

if TYPE_CHECKING:
    from specpair.commands.cli.common import Subparsers


def _gpu(text: str) -> str:
    """--gpu: a key of the GPU catalog; a typo is a usage error."""
    from specpair.facts import hardware

    if hardware.lookup(text) is None:
        raise argparse.ArgumentTypeError(f"unknown GPU {text!r}; {hardware.unknown_hint(text)}")
    return text


def register(sub: Subparsers) -> None:
    p = sub.add_parser("budget", help="the two-model memory budget of one pair, with what-ifs")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--gpu", type=_gpu, help="GPU catalog key, e.g. H100-80GB")
    p.add_argument("--tp", type=positive, help="tensor-parallel size")
    kv_choices = ["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]
    p.add_argument("--kv-dtype", choices=kv_choices, help="KV dtype of the target pool")
    p.add_argument("--draft-kv-dtype", choices=kv_choices, help="KV dtype of the draft pool")
    p.add_argument("--memory-fraction", type=fraction, help="memory fraction (0-1)")
    p.add_argument("--context-length", type=positive, help="serving context length")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
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
