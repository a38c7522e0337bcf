"""The `specpair` command. Thin: parse arguments, call the library, render, exit."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specpair import __version__
from specpair.model.errors import Location, Problem, SpecpairError
from specpair.write.streams import PipeGuard

if TYPE_CHECKING:
    from specpair.resolve.pair import ResolvedPair

EXIT_OK, EXIT_PROBLEMS, EXIT_STALE = 0, 1, 3

IMPACT_CLASSES = ("any", "target", "draft", "both", "deployment", "engine", "slo", "staging",
                  "speculation", "codesign", "workloads", "waivers", "metadata", "added",
                  "removed", "renamed", "invalid", "stale-lock")


def find_root(start: Path | None = None) -> Path:
    """The repository root, found as git finds its top level: the nearest folder from
    `start` (the working directory) upwards that holds `runbooks/`. Outside any such tree
    the working directory itself, so errors name the folder the user is in."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "runbooks").is_dir():
            return folder
    return here


def _root(args: argparse.Namespace) -> Path:
    from specpair.load.project import load_config

    root = Path(args.root) if getattr(args, "root", None) else find_root()
    load_config(root)  # a pinned release other than this one is refused, by name
    return root


def _paths(args: argparse.Namespace) -> list[Path]:
    """The paths the user named (relative to where they are), else the root's runbooks/."""
    return [Path(p) for p in args.paths] if args.paths else [_root(args) / "runbooks"]


def _classes(text: str) -> set[str]:
    """--fail-on: a typo must be a usage error, not a silently ignored class."""
    given = {c.strip() for c in text.split(",") if c.strip()}
    unknown = sorted(given - set(IMPACT_CLASSES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown class(es) {', '.join(map(repr, unknown))}; choose from "
            + ", ".join(IMPACT_CLASSES))
    return given


def _levels(text: str) -> list[int]:
    """--concurrency: positive whole numbers, comma-separated."""
    try:
        levels = sorted({int(c) for c in text.split(",") if c.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers (e.g. 1,4,16)") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError("concurrency levels must be positive, e.g. 1,4,16")
    return levels


def _gpu(text: str) -> str:
    """--gpu: a key of the GPU catalog; a typo is a usage error."""
    from specpair.facts import hardware

    if hardware.lookup(text) is None:
        raise argparse.ArgumentTypeError(f"unknown GPU {text!r}; {hardware.unknown_hint(text)}")
    return text


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{value:g} is not between 0 and 1 (exclusive)")
    return value


def _one_pair(root: Path, runbook: str) -> ResolvedPair:
    """The one pair a command about one runbook (budget, plan, bench, …) works on: a
    folder holding several runbooks is a usage error, not an unpacking traceback."""
    from specpair.commands.build import load_pairs

    pairs = load_pairs(root, [Path(runbook)])
    if len(pairs) != 1:
        raise SpecpairError.single(runbook, f"{len(pairs)} runbooks here; this command "
                                   "works on one", "give one runbook file, e.g. "
                                   "runbooks/<pair>/runbook.yaml")
    return pairs[0]


def _validate(args: argparse.Namespace) -> int:
    from specpair.commands.check import engine_refusals
    from specpair.load.runbooks import discover, load_runbook

    paths = discover(_paths(args))
    if not paths:
        print("no runbooks found", file=sys.stderr)
        return EXIT_PROBLEMS
    failed = 0
    for path in paths:
        try:
            refusals = engine_refusals(load_runbook(path), str(path))
            if refusals:  # valid YAML, but an engine would refuse to start it
                raise SpecpairError(refusals)
        except SpecpairError as exc:
            failed += 1
            print(exc.render(), file=sys.stderr)
    print(f"{len(paths) - failed} of {len(paths)} runbook(s) valid",
          file=sys.stderr if failed else sys.stdout)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _build(args: argparse.Namespace) -> int:
    from specpair.commands.build import build

    root = _root(args)
    result = build(root, check_only=args.check)
    stale = result.drift.stale
    if args.check:
        if stale:
            from specpair.load.project import commands

            print(f"generated files are stale; run `{commands(root).build}` and commit the "
                  "result:", file=sys.stderr)
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

    from specpair.analyse.budget import compute
    from specpair.generate.budget_files import markdown
    from specpair.load import rules
    from specpair.model.common import KVDtype

    pair = _one_pair(_root(args), args.runbook)
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
    try:
        what_if = rb.model_validate({**rb.model_dump(), "deployment": deployment})
    except ValidationError as exc:
        raise SpecpairError([Problem(Location("command line", 0, 0, ".".join(
            str(p) for p in e["loc"])), e["msg"], "change the option's value")
            for e in exc.errors(include_url=False)]) from None
    # the rules `validate` applies: a what-if the engine could not run is refused, not budgeted
    refused = rules.check_runbook(what_if, folder_name=pair.name)
    if refused:
        raise SpecpairError([Problem(Location("command line", 0, 0, f.field),
                                     f.message, f.hint) for f in refused])
    pair = pair.model_copy(update={"runbook": what_if, "gpu": deployment["gpu"]})
    result = compute(pair)
    overrides = {f"--{flag.replace('_', '-')}": str(getattr(args, flag)) for flag in (
        "gpu", "tp", "kv_dtype", "draft_kv_dtype", "memory_fraction", "context_length")
        if getattr(args, flag) is not None}
    if args.json:
        data = result.model_dump(mode="json")
        if overrides:  # a what-if never passes for the committed budget.json
            data["what_if"] = overrides
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(markdown(pair, result, overrides), end="")
    return EXIT_OK


def _declare(args: argparse.Namespace) -> int:
    from specpair.generate.render import dump_json
    from specpair.load.runbooks import LOCK_NAME, discover, load_runbook
    from specpair.lock.declare import declare
    from specpair.write.writer import atomic_write

    paths = discover(_paths(args))
    if len(paths) != 1 or args.target_config is None or args.target_bytes is None:
        raise SpecpairError.single(
            "--declare", "a declared lock is written for one runbook at a time, from the "
            "target's config.json and weight bytes",
            "specpair lock --declare runbooks/<pair>/runbook.yaml --target-config "
            "PATH/config.json --target-bytes N [--draft-config PATH/config.json "
            "--draft-bytes N]")
    loaded = load_runbook(paths[0])
    lock = declare(loaded, Path(args.target_config), args.target_bytes,
                   Path(args.draft_config) if args.draft_config else None, args.draft_bytes)
    atomic_write(loaded.folder / LOCK_NAME, dump_json(lock.model_dump(
        mode="json", exclude_none=True)))
    facts = sorted({f"{role}.{u}" for role in ("target", "draft")
                    if (art := getattr(lock, role)) is not None for u in art.unconfirmed})
    print(f"{loaded.name}: declared lock written to {loaded.folder / LOCK_NAME}; "
          f"unconfirmed until `specpair lock` resolves them: {', '.join(facts)}")
    return EXIT_OK


def _init(args: argparse.Namespace) -> int:
    from specpair.commands.init import init

    root = Path(args.dir)
    result = init(root, force=args.force)
    for label, names in (("written", result.written), ("unchanged", result.unchanged)):
        for name in names:
            print(f"  {label:9} {name}")
    for name in result.kept:
        print(f"  kept      {name} (differs from the template; --force rewrites it)")
    for note in result.notes:
        print(f"  note      {note}")
    where = "" if root.resolve() == Path.cwd().resolve() else f"cd {args.dir} && "
    print(f"specpair {__version__} repository in {root}; next: {where}specpair build && "
          "specpair check, then commit (README: \"Use specpair in your own repository\")")
    return EXIT_OK


def _bytes(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("a size in bytes must be positive (a draft bundled "
                                         "in the target needs no --draft-bytes)")
    return value


def _lock(args: argparse.Namespace) -> int:
    from specpair.commands.lock import lock_all
    from specpair.load.runbooks import discover, load_runbook

    if args.declare:
        return _declare(args)
    paths = discover(_paths(args))
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
    from specpair.analyse.checks.gate import failing
    from specpair.commands import check
    from specpair.write.writer import atomic_write

    reports = check.check(_root(args), _paths(args), hub=args.hub)
    rendered = {"text": lambda: check.text(reports, args.strict), "json": lambda: check.as_json(
        reports), "sarif": lambda: check.sarif(reports)}[args.format]()
    if args.output:  # never through a link: it could write over any file of the runner
        atomic_write(Path(args.output), rendered.encode("utf-8"))
        print(check.text(reports, args.strict).splitlines()[-1])
    else:
        sys.stdout.write(rendered)
    failed = sum(len(failing(r.findings, args.strict)) for r in reports)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _impact(args: argparse.Namespace) -> int:
    from specpair.commands import impact
    from specpair.write.writer import atomic_write

    impacts, problems = impact.impact(_root(args), args.base, args.head)
    rendered = impact.as_json(impacts, problems) if args.format == "json" else \
        impact.markdown(impacts, problems, args.base, args.head)
    if args.output:  # never through a link, as for `check --output`
        atomic_write(Path(args.output), rendered.encode("utf-8"))
    else:
        sys.stdout.write(rendered)
    fail_on: set[str] = args.fail_on
    hit = {c for i in impacts for c in i.classes} | ({"invalid"} if problems else set())
    if "any" in fail_on and hit - {"metadata", "waivers"}:
        return EXIT_STALE
    return EXIT_STALE if fail_on & hit else EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    import datetime as dt

    from specpair.commands.bench import run
    from specpair.commands.build import _display, exclusive
    from specpair.generate.render import dump_json
    from specpair.load.runbooks import MEASUREMENTS_DIR
    from specpair.write.writer import atomic_write

    root = _root(args)
    pair = _one_pair(root, args.runbook)
    folder = Path(os.path.abspath(args.runbook)).parent
    if args.against:
        from specpair.commands.bench_against import gate

        return gate(pair, folder, Path(args.against), args.baseline.rstrip("/"),
                    args.spec.rstrip("/"), args.concurrency, args.time_limit, args.workloads,
                    Path(args.sarif) if args.sarif else None, _display(root, Path(args.runbook)))
    levels: list[int] = args.concurrency or _bench_levels(pair)
    static = args.static.rstrip("/") if args.static else None
    if static is None and pair.runbook.speculation.schedule is not None:
        print("note: the schedule is not compared with its static K: start the generated "
              "launch-*-static.sh and pass its URL with --static", file=sys.stderr)
    measurement = run(pair, args.baseline.rstrip("/"), args.spec.rstrip("/"), levels,
                      args.time_limit, folder=folder, only=args.workloads, static=static)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    record = folder / MEASUREMENTS_DIR / f"{stamp}.json"
    with exclusive(root):  # a build running meanwhile would write the card of before
        atomic_write(record, dump_json(measurement.model_dump(mode="json")))
        # the card, break-even (fitted on the latest record) and what follows from it
        # (alert thresholds, dashboards) all change: regenerate every output of this
        # pair, so that `build --check` stays clean after a bench run
        generated = _regenerate(root, args.runbook)
    print(f"measurement written to {record}")
    print(generated["card.md"].decode("utf-8"))  # as written, not read back through a link
    return EXIT_OK


def _bench_levels(pair: ResolvedPair) -> list[int]:
    """Without --concurrency: 1, 4, 16; under a speculation schedule the concurrencies it
    switches at (every range's ends, up to what the deployment holds), so the record shows
    each K where the schedule hands over."""
    from specpair.analyse.budget import compute
    from specpair.analyse.schedule import attach, bench_levels, max_batch

    scheduled = attach(pair)
    if scheduled.schedule is None:
        return [1, 4, 16]
    return bench_levels(scheduled.schedule, max_batch(compute(scheduled)))


def _regenerate(root: Path, runbook: str) -> dict[str, bytes]:
    """Rewrite the generated outputs of one pair (caller holds the build lock); returns
    them by file name."""
    from specpair.commands.build import _display, render
    from specpair.load import file_policy
    from specpair.load.runbooks import GENERATED_DIR
    from specpair.write.writer import atomic_write

    pair = _one_pair(root, runbook)
    generated = Path(_display(root, Path(os.path.abspath(runbook)).parent)) / GENERATED_DIR
    written: dict[str, bytes] = {}
    for rel, content in render(root, [pair]).files.items():
        if rel.parent == generated:
            atomic_write(root / rel, content)
            written[rel.name] = content
    # an output the pair no longer has goes, as the build removes it (a schedule that the
    # record turns to K = 0 everywhere has no static-K launch any more)
    for path in sorted((root / generated).iterdir()):
        if path.is_file() and path.name not in written:
            file_policy.remove(path)
    return written


def _slo(args: argparse.Namespace) -> int:
    from specpair.commands import slo

    root = _root(args)
    pair = _one_pair(root, args.runbook)
    folder = Path(os.path.abspath(args.runbook)).parent
    if args.prometheus:
        proposal = slo.from_prometheus(pair, args.prometheus.rstrip("/"),
                                       slo.duration(args.since), args.margin)
    else:
        record, name = slo.latest_record(folder)
        proposal = slo.from_record(pair, record, name, args.margin)
    print(slo.report(proposal), end="")
    if not args.write:
        return EXIT_OK
    from specpair.commands.build import exclusive

    with exclusive(root):  # the SLO reaches alert rules, dashboards, card: regenerate
        status = slo.write(proposal, Path(args.runbook), args.runbook)
        if status == EXIT_OK:
            _regenerate(root, args.runbook)
    return status


def _calibrate(args: argparse.Namespace) -> int:
    from specpair.analyse.budget import compute
    from specpair.analyse.calibrate import fit_pair, markdown

    pair = _one_pair(_root(args), args.runbook)
    if pair.measurement is None:
        raise SpecpairError.single(args.runbook, "the pair has no bench record",
                                   "run `specpair bench` first (it writes measurements/)")
    levels = ({int(c) for c in args.concurrency.split(",") if c.strip()}
              if args.concurrency else None)
    fitted = fit_pair(pair, compute(pair), pair.measurement, levels)
    if fitted is None:
        raise SpecpairError.single(args.runbook, "no usable cell at those concurrencies "
                                   "(failed requests or no acceptance counters)",
                                   "pick concurrencies the record holds")
    print(markdown(fitted), end="")
    return EXIT_OK


def _staging(args: argparse.Namespace) -> int:
    from specpair.commands.staging_ingest import calibrate_text, ingest

    if args.action == "ingest":
        from specpair.commands.build import exclusive

        with exclusive(_root(args)):  # it writes generated files, like a build
            text = ingest(_one_pair(_root(args), args.runbook), Path(args.runbook),
                          Path(args.log), Path(args.engine_log) if args.engine_log else None)
        print(text, end="")
    else:
        print(calibrate_text(_one_pair(_root(args), args.runbook)), end="")
    return EXIT_OK


def _site(args: argparse.Namespace) -> int:
    from specpair.commands import site
    from specpair.commands.build import exclusive, load_pairs
    from specpair.write import writer

    root = _root(args)
    changes = {}
    if args.changes_base:
        try:
            changes = site.changes_by_pair(root, args.changes_base)
        except SpecpairError as exc:
            print(f"change checklists skipped: {exc.problems[0].message}", file=sys.stderr)
    with exclusive(root):
        outputs = site.render(load_pairs(root), changes, cache=root / "site" / ".cache")
        drift = writer.write(root, outputs)
    print(f"site pages: {len(outputs.files)} file(s), {len(drift.stale)} updated")
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from specpair.generate import schema_files

    files = schema_files.generate([])
    sys.stdout.write(files[Path(f"schema/{args.which}.schema.json")].decode())
    return EXIT_OK


def _gpu_list(text: str) -> tuple[str, ...]:
    """--gpus: catalog keys and `common`, comma-separated; a typo is a usage error."""
    from specpair.analyse.plan import PlanError, expand_gpus

    try:
        found = expand_gpus([g for g in text.split(",") if g.strip()])
    except PlanError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not found:
        raise argparse.ArgumentTypeError("name at least one GPU (or `common`)")
    return found


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _plan(args: argparse.Namespace) -> int:
    from specpair.analyse.plan import Options, PlanError, Targets, plan
    from specpair.generate import plan_report

    root = _root(args)
    pair = _one_pair(root, args.runbook)
    opts = Options(gpus=args.gpus or (), max_gpus=args.max_gpus, top=args.top,
                   targets=Targets(tpot_ms=args.tpot_ms, ttft_ms=args.ttft_ms,
                                   concurrency=args.concurrency, rate=args.rate))
    try:
        result = plan(pair, opts)
    except PlanError as exc:
        print(f"specpair plan: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(plan_report.as_json(result))
    else:
        sys.stdout.write(plan_report.markdown(result, args.top))
    best = result.best
    if best is None:
        return EXIT_PROBLEMS
    if best.depth == 0 or not best.changes:
        if args.write:
            print("\n--write: nothing to write (see the recommendation above)", file=sys.stderr)
        return EXIT_OK
    from specpair.write.runbook_edit import Change, plan_edit, write_edit

    path = Path(args.runbook)
    if path.is_dir():
        from specpair.load.runbooks import discover

        (path,) = discover([path])
    edit = plan_edit(path, pair.source_file, [
        Change(tuple(k.split(".")), v) for k, v in best.changes.items()])
    out = sys.stderr if args.json else sys.stdout
    if not args.write:
        print("\nThe recommendation as a runbook patch (`--write` applies it):\n", file=out)
        print(edit.diff, end="", file=out)
        return EXIT_OK
    if not edit.applied:
        print("\n--write: not applied in place (" + "; ".join(edit.reasons) + "); apply this "
              "patch by hand:\n", file=out)
        print(edit.diff, end="", file=out)
        return EXIT_OK
    write_edit(edit)
    print(f"\n--write: {pair.source_file} updated; run `specpair build` to regenerate its "
          "outputs:\n", file=out)
    print(edit.diff, end="", file=out)
    return EXIT_OK


PATHS_HELP = "runbook files or folders (default: the root's runbooks/)"
ROOT_HELP = ("repository root (holds runbooks/); default: the nearest folder upwards from "
             "here that holds runbooks/")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="specpair", description=(
        "Runbook-as-code for speculative decoding: one typed spec per target/draft pair."))
    top.add_argument("--version", action="version", version=f"specpair {__version__}")
    sub = top.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="scaffold a runbook repository: specpair.toml, an example "
                                     "pair, the CI gate, the site; never overwrites")
    p.add_argument("dir", nargs="?", default=".", help="the repository (default: here)")
    p.add_argument("--force", action="store_true",
                   help="rewrite files that differ from the templates")
    p.set_defaults(func=_init)

    p = sub.add_parser("validate", help="check runbooks against the spec; report all problems")
    p.add_argument("paths", nargs="*", help=PATHS_HELP)
    p.set_defaults(func=_validate)

    p = sub.add_parser("build", help="regenerate every output from runbooks and locks")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 3 and list the files a build would change")
    p.set_defaults(func=_build)

    p = sub.add_parser("check", help="the pre-deployment gate: pair and co-design rules")
    p.add_argument("paths", nargs="*", help=PATHS_HELP)
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--format", choices=["text", "json", "sarif"], default="text")
    p.add_argument("--output", help="write the report to this file")
    p.add_argument("--strict", action="store_true", help="unwaived warnings fail too")
    p.add_argument("--hub", action="store_true", help="also ask the hub whether locked "
                                                      "branches moved (SP103)")
    p.set_defaults(func=_check)

    p = sub.add_parser("impact", help="what a change obliges reviewers to re-check")
    p.add_argument("--base", required=True, help="git revision to compare from")
    p.add_argument("--head", help="git revision to compare to (default: the working tree)")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--output", help="write the report to this file")
    p.add_argument("--fail-on", type=_classes, default={"invalid"},
                   help="comma-separated classes that exit 3 (default: invalid, which a stale "
                   "lock is; '' for none): " + ", ".join(IMPACT_CLASSES))
    p.set_defaults(func=_impact)

    p = sub.add_parser("bench", help="run the measurement protocol; write a record and card")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--baseline", required=True, help="URL of the target-only server")
    p.add_argument("--spec", required=True, help="URL of the speculative server")
    p.add_argument("--static", help="under a speculation schedule: URL of the same pair at "
                   "the schedule's largest K without it (generated launch-*-static.sh), "
                   "measured beside the two others; the card says which wins where")
    p.add_argument("--concurrency", type=_levels, default=None,
                   help="comma-separated levels (default 1,4,16; under a speculation "
                   "schedule the concurrencies it switches at, up to the deployment's "
                   "max running requests; with --against the record's)")
    p.add_argument("--time-limit", type=float, default=600.0,
                   help="seconds per run (server × workload × concurrency)")
    p.add_argument("--workloads", type=lambda t: {x for x in t.split(",") if x},
                   help="comma-separated workload names to run (default all)")
    p.add_argument("--against", metavar="RECORD", help="the regression gate: replay the "
                   "record's request sets on this (candidate) deployment and compare per "
                   "class; exits 1 beyond acceptance.regression's tolerances")
    p.add_argument("--sarif", help="with --against: where to write the SARIF log (default "
                   "measurements/against/<UTC time>.sarif)")
    p.add_argument("--root", help=ROOT_HELP)
    p.set_defaults(func=_bench)

    p = sub.add_parser("slo", help="the acceptance SLO from your own traffic")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("propose", help="propose min τ at the runbook's scope and "
                           "percentile from the latest replay record or from Prometheus")
    q.add_argument("runbook", help="runbook file")
    q.add_argument("--prometheus", metavar="URL", help="query the pair's τ recording rule "
                   "on this Prometheus server instead of the latest record")
    q.add_argument("--since", default="7d", help="with --prometheus: how far back (7d)")
    q.add_argument("--margin", type=_fraction, default=0.05,
                   help="the SLO is the interval's low end less this fraction (0.05)")
    q.add_argument("--write", action="store_true", help="edit the runbook in place: "
                   "min_length, basis own_traffic and the provenance")
    q.add_argument("--root", help=ROOT_HELP)
    q.set_defaults(func=_slo)

    p = sub.add_parser("plan", help="search deployments of a pair: GPU, TP, KV dtype, memory "
                                     "fraction, draft depth or no draft; rank them")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--gpus", type=_gpu_list, help="comma-separated GPU catalog keys, or "
                   "`common` (default: the runbook's GPU)")
    p.add_argument("--max-gpus", type=_positive, help="GPUs per replica and in all "
                   "(default: the runbook's gpus_per_node)")
    p.add_argument("--tpot-ms", type=_positive_float, help="time per output token target")
    p.add_argument("--ttft-ms", type=_positive_float, help="time to first token target")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=_positive, help="sequences in flight per "
                      "replica (default: the runbook's expected concurrency, else the most "
                      "each deployment holds)")
    load.add_argument("--rate", type=_positive_float, help="requests per second to serve "
                      "with the fewest GPUs")
    p.add_argument("--top", type=_positive, default=10, help="rows to show (default 10)")
    p.add_argument("--json", action="store_true", help="the whole plan as JSON")
    p.add_argument("--write", action="store_true", help="apply the recommendation to the "
                   "runbook in place, keeping comments and order")
    p.add_argument("--root", help=ROOT_HELP)
    p.set_defaults(func=_plan)

    p = sub.add_parser("staging", help="recorded cold starts: ingest a deployment log, "
                                        "calibrate the staging model")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("ingest", help="store the log of stage-and-launch.sh (or of the "
                                          "manifest's containers) under measurements/staging/")
    q.add_argument("runbook", help="runbook file")
    q.add_argument("log", help="the deployment log (its stdout, or `kubectl logs`)")
    q.add_argument("--engine-log", help="the engine's own log ($LOG of the script): splits "
                                        "the engine start into weight load and graph capture")
    q.add_argument("--root", help=ROOT_HELP)
    q.set_defaults(func=_staging)
    q = actions.add_parser("calibrate", help="staging assumptions from the recorded starts, "
                                             "with their provenance")
    q.add_argument("runbook", help="runbook file")
    q.add_argument("--root", help=ROOT_HELP)
    q.set_defaults(func=_staging)

    p = sub.add_parser("site", help="generate the MkDocs pages under site/docs/pairs/")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--changes-base", help="git revision for each pair's change checklist")
    p.set_defaults(func=_site)

    p = sub.add_parser("lock", help="resolve both artifacts into lock.json (no weight download)")
    p.add_argument("paths", nargs="*", help=PATHS_HELP)
    p.add_argument("--refresh", action="store_true", help="follow branches that have moved")
    p.add_argument("--offline", action="store_true",
                   help="ask no hub (also HF_HUB_OFFLINE=1); local checkpoints still resolve")
    p.add_argument("--declare", action="store_true",
                   help="write a declared lock for one runbook from config.json files and "
                        "declared sizes, every fact listed as unconfirmed (no hub, no weights)")
    p.add_argument("--target-config", help="--declare: the target's config.json")
    p.add_argument("--target-bytes", type=_bytes, help="--declare: the target's weight bytes")
    p.add_argument("--draft-config", help="--declare: the draft's config.json")
    p.add_argument("--draft-bytes", type=_bytes,
                   help="--declare: the draft's weight bytes (a draft bundled in the target "
                        "needs none: its weights are inside the target's; given, they are "
                        "the bundled layers' share)")
    p.set_defaults(func=_lock)

    p = sub.add_parser("calibrate", help="fit the pair's step costs on its bench records")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--concurrency", help="fit only on these levels, e.g. 1,2 (default: all); "
                                         "the others are predicted")
    p.set_defaults(func=_calibrate)

    p = sub.add_parser("budget", help="the two-model memory budget of one pair, with what-ifs")
    p.add_argument("runbook", help="runbook file")
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--gpu", type=_gpu, help="GPU catalog key, e.g. H100-80GB")
    p.add_argument("--tp", type=_positive, help="tensor-parallel size")
    kv_choices = ["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]
    p.add_argument("--kv-dtype", choices=kv_choices, help="KV dtype of the target pool")
    p.add_argument("--draft-kv-dtype", choices=kv_choices, help="KV dtype of the draft pool")
    p.add_argument("--memory-fraction", type=_fraction, help="memory fraction (0-1)")
    p.add_argument("--context-length", type=_positive, help="serving context length")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.set_defaults(func=_budget)

    p = sub.add_parser("schema", help="print a JSON Schema derived from the models")
    p.add_argument("which", choices=["runbook", "lock"], nargs="?", default="runbook")
    p.set_defaults(func=_schema)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out, err = PipeGuard(sys.stdout), PipeGuard(sys.stderr)  # also `2>&1 | head`
    sys.stdout, sys.stderr = out, err
    try:
        status = int(args.func(args))
    except SpecpairError as exc:
        print(exc.render(), file=sys.stderr)
        status = EXIT_PROBLEMS
    except OSError as exc:  # an I/O failure the library did not locate (--output, …)
        from specpair.load.file_policy import io_error

        print(io_error(exc.filename or "specpair", exc, "complete the command").render(),
              file=sys.stderr)
        status = EXIT_PROBLEMS
    except KeyboardInterrupt:
        status = 130
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = out.inner, err.inner
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
