"""The `specpair` command. Thin: parse arguments, call the library, render, exit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from specpair import __version__
from specpair.errors import Location, Problem, SpecpairError

EXIT_OK, EXIT_PROBLEMS, EXIT_STALE = 0, 1, 3


def _validate(args: argparse.Namespace) -> int:
    from specpair.runbooks import discover, load_runbook

    paths = discover([Path(p) for p in args.paths])
    if not paths:
        print("no runbooks found", file=sys.stderr)
        return EXIT_PROBLEMS
    failed = 0
    for path in paths:
        try:
            load_runbook(path)
        except SpecpairError as exc:
            failed += 1
            print(exc.render(), file=sys.stderr)
    print(f"{len(paths) - failed} of {len(paths)} runbook(s) valid",
          file=sys.stderr if failed else sys.stdout)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _build(args: argparse.Namespace) -> int:
    from specpair.build import build

    root = Path(args.root)
    result = build(root, check_only=args.check)
    stale = result.drift.stale
    if args.check:
        if stale:
            print("generated files are stale; run `nox -s build` (or `specpair build`) and "
                  "commit the result:", file=sys.stderr)
            for rel in stale:
                why = ("missing" if rel in result.drift.missing else
                       "no longer generated" if rel in result.drift.orphaned else "differs")
                print(f"  {rel} ({why})", file=sys.stderr)
            return EXIT_STALE
        print(f"{len(result.pairs)} pair(s): generated files are up to date")
        return EXIT_OK
    print(f"{len(result.pairs)} pair(s) built; {len(stale)} file(s) updated")
    for rel in stale:
        print(f"  {rel}")
    return EXIT_OK


def _budget(args: argparse.Namespace) -> int:
    import json

    from pydantic import ValidationError

    from specpair import hardware
    from specpair.budget import compute
    from specpair.build import load_pairs
    from specpair.generators.budget_files import markdown
    from specpair.schema.common import KVDtype

    (pair,) = load_pairs(Path(args.root), [Path(args.runbook)])
    rb = pair.runbook
    deployment = rb.deployment.model_dump()
    if args.gpu is not None:
        if args.gpu not in hardware.CATALOG:
            raise SpecpairError.single("--gpu", f"unknown GPU {args.gpu!r}",
                                       "use one of: " + ", ".join(sorted(hardware.CATALOG)))
        deployment["gpu"] = args.gpu
    if args.tp is not None:
        deployment["parallel"]["tensor"] = args.tp
    for flag, key in (("kv_dtype", "kv_cache_dtype"), ("draft_kv_dtype", "draft_kv_cache_dtype")):
        if getattr(args, flag) is not None:
            deployment[key] = KVDtype(getattr(args, flag))
    for key in ("memory_fraction", "context_length"):
        if getattr(args, key) is not None:
            deployment[key] = getattr(args, key)
    try:
        what_if = rb.model_validate({**rb.model_dump(), "deployment": deployment})
    except ValidationError as exc:
        raise SpecpairError([Problem(Location("command line", 0, 0, ".".join(
            str(p) for p in e["loc"])), e["msg"], "change the option's value")
            for e in exc.errors(include_url=False)]) from None
    pair = pair.model_copy(update={"runbook": what_if, "gpu": deployment["gpu"]})
    result = compute(pair)
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        print(markdown(pair, result), end="")
    return EXIT_OK


def _lock(args: argparse.Namespace) -> int:
    from specpair.locking import lock_all
    from specpair.runbooks import discover, load_runbook

    paths = discover([Path(p) for p in args.paths])
    loaded, failed = [], 0
    for path in paths:
        try:
            loaded.append(load_runbook(path))
        except SpecpairError as exc:
            failed += 1
            print(exc.render(), file=sys.stderr)
    outcomes = lock_all(loaded, refresh=args.refresh, offline=args.offline)
    for outcome in outcomes:
        name = outcome.runbook.name
        for problem in outcome.problems:
            print(problem.render(), file=sys.stderr)
        for drift in outcome.drift:
            print(f"{name}: drift: {drift}" + ("" if args.refresh else
                  " (kept the locked commit; --refresh follows it)"), file=sys.stderr)
        if not outcome.problems:
            print(f"{name}: {'lock written' if outcome.written else 'lock unchanged'}")
    failed += sum(1 for o in outcomes if o.problems)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from specpair import gate
    from specpair.checks import failing

    reports = gate.check(Path(args.root), [Path(p) for p in args.paths], hub=args.hub)
    rendered = {"text": lambda: gate.text(reports, args.strict), "json": lambda: gate.as_json(
        reports), "sarif": lambda: gate.sarif(reports)}[args.format]()
    if args.output:
        Path(args.output).write_text(rendered, encoding="utf-8")
        print(gate.text(reports, args.strict).splitlines()[-1])
    else:
        sys.stdout.write(rendered)
    failed = sum(len(failing(r.findings, args.strict)) for r in reports)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _impact(args: argparse.Namespace) -> int:
    from specpair import impact

    impacts, problems = impact.impact(Path(args.root), args.base, args.head)
    rendered = impact.as_json(impacts, problems) if args.format == "json" else \
        impact.markdown(impacts, problems, args.base, args.head)
    if args.output:
        Path(args.output).write_text(rendered, encoding="utf-8")
    else:
        sys.stdout.write(rendered)
    fail_on = {c for c in args.fail_on.split(",") if c} if args.fail_on else set()
    hit = {c for i in impacts for c in i.classes} | ({"invalid"} if problems else set())
    if "any" in fail_on and hit - {"metadata", "waivers"}:
        return EXIT_STALE
    return EXIT_STALE if fail_on & hit else EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    import datetime as dt

    from specpair.bench.runner import run
    from specpair.build import load_pairs
    from specpair.generators import card_files
    from specpair.runbooks import GENERATED_DIR, MEASUREMENTS_DIR
    from specpair.writer import atomic_write, dump_json

    root = Path(args.root)
    (pair,) = load_pairs(root, [Path(args.runbook)])
    levels = sorted({int(c) for c in args.concurrency.split(",") if c.strip()})
    if not levels or levels[0] < 1:
        raise SpecpairError.single("--concurrency", "concurrency levels must be positive",
                                   "e.g. --concurrency 1,4,16")
    measurement = run(pair, args.baseline.rstrip("/"), args.spec.rstrip("/"), levels,
                      args.time_limit)
    folder = Path(args.runbook).resolve().parent
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    record = folder / MEASUREMENTS_DIR / f"{stamp}.json"
    atomic_write(record, dump_json(measurement.model_dump(mode="json")))
    measured = pair.model_copy(update={"measurement": measurement})
    for name, content in card_files.generate(measured).items():
        atomic_write(folder / GENERATED_DIR / name, content)
    print(f"measurement written to {record}")
    print((folder / GENERATED_DIR / "card.md").read_text())
    return EXIT_OK


def _site(args: argparse.Namespace) -> int:
    from specpair import site, writer
    from specpair.build import exclusive, load_pairs

    root = Path(args.root)
    changes = {}
    if args.changes_base:
        try:
            changes = site.changes_by_pair(root, args.changes_base)
        except SpecpairError as exc:
            print(f"change checklists skipped: {exc.problems[0].message}", file=sys.stderr)
    with exclusive(root):
        outputs = site.render(load_pairs(root), changes)
        drift = writer.write(root, outputs)
    print(f"site pages: {len(outputs.files)} file(s), {len(drift.stale)} updated")
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from specpair.generators import schema_files

    files = schema_files.generate([])
    sys.stdout.write(files[Path(f"schema/{args.which}.schema.json")].decode())
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="specpair", description=(
        "Runbook-as-code for speculative decoding: one typed spec per target/draft pair."))
    top.add_argument("--version", action="version", version=f"specpair {__version__}")
    sub = top.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check runbooks against the spec; report all problems")
    p.add_argument("paths", nargs="*", default=["runbooks"], help="runbook files or folders")
    p.set_defaults(func=_validate)

    p = sub.add_parser("build", help="regenerate every output from runbooks and locks")
    p.add_argument("--root", default=".", help="repository root (holds runbooks/)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 3 and list the files a build would change")
    p.set_defaults(func=_build)

    p = sub.add_parser("check", help="the pre-deployment gate: pair and co-design rules")
    p.add_argument("paths", nargs="*", default=["runbooks"], help="runbook files or folders")
    p.add_argument("--root", default=".", help="repository root (paths in reports)")
    p.add_argument("--format", choices=["text", "json", "sarif"], default="text")
    p.add_argument("--output", help="write the report to this file")
    p.add_argument("--strict", action="store_true", help="unwaived warnings fail too")
    p.add_argument("--hub", action="store_true", help="also ask the hub whether locked "
                                                      "branches moved (SP103)")
    p.set_defaults(func=_check)

    p = sub.add_parser("impact", help="what a change obliges reviewers to re-check")
    p.add_argument("--base", required=True, help="git revision to compare from")
    p.add_argument("--head", help="git revision to compare to (default: the working tree)")
    p.add_argument("--root", default=".", help="repository root")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--output", help="write the report to this file")
    p.add_argument("--fail-on", default="invalid",
                   help="comma-separated classes that exit 3 (default: invalid, which "
                   "includes stale-lock): any, target, draft, both, deployment, engine, slo, "
                   "staging, added, removed, renamed, invalid, stale-lock; '' for none")
    p.set_defaults(func=_impact)

    p = sub.add_parser("bench", help="run the measurement protocol; write a record and card")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--baseline", required=True, help="URL of the target-only server")
    p.add_argument("--spec", required=True, help="URL of the speculative server")
    p.add_argument("--concurrency", default="1,4,16", help="comma-separated levels")
    p.add_argument("--time-limit", type=float, default=600.0,
                   help="seconds per run (server × workload × concurrency)")
    p.add_argument("--root", default=".", help="repository root (holds runbooks/)")
    p.set_defaults(func=_bench)

    p = sub.add_parser("site", help="generate the MkDocs pages under site/docs/pairs/")
    p.add_argument("--root", default=".", help="repository root (holds runbooks/ and site/)")
    p.add_argument("--changes-base", help="git revision for each pair's change checklist")
    p.set_defaults(func=_site)

    p = sub.add_parser("lock", help="resolve both artifacts into lock.json (no weight download)")
    p.add_argument("paths", nargs="*", default=["runbooks"], help="runbook files or folders")
    p.add_argument("--refresh", action="store_true", help="follow branches that have moved")
    p.add_argument("--offline", action="store_true",
                   help="ask no hub (also HF_HUB_OFFLINE=1); local checkpoints still resolve")
    p.set_defaults(func=_lock)

    p = sub.add_parser("budget", help="the two-model memory budget of one pair, with what-ifs")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--root", default=".", help="repository root (holds runbooks/)")
    p.add_argument("--gpu", help="GPU catalog key, e.g. H100-80GB")
    p.add_argument("--tp", type=int, help="tensor-parallel size")
    kv_choices = ["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]
    p.add_argument("--kv-dtype", choices=kv_choices, help="KV dtype of the target pool")
    p.add_argument("--draft-kv-dtype", choices=kv_choices, help="KV dtype of the draft pool")
    p.add_argument("--memory-fraction", type=float, help="memory fraction (0-1)")
    p.add_argument("--context-length", type=int, help="serving context length")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.set_defaults(func=_budget)

    p = sub.add_parser("schema", help="print a JSON Schema derived from the models")
    p.add_argument("which", choices=["runbook", "lock"], nargs="?", default="runbook")
    p.set_defaults(func=_schema)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SpecpairError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_PROBLEMS
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `specpair … | head`
        sys.stderr.close()
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
