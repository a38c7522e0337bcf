"""`specpair impact`: what a change obliges the team to re-check, pair by pair.

Both revisions' runbooks and locks are loaded and resolved (Jsonnet evaluated, so a change
in a shared library reaches every runbook that imports it), then compared as data: a
change of whitespace or comments is no change at all. Each difference falls into a class,
and each class carries the obligation the co-design hook implies:

- target artifact or revision → re-check acceptance and re-run the measurement protocol;
- draft artifact, revision, method or block size → re-measure acceptance, re-stage,
  re-budget KV, re-check co-design;
- both → the whole two-model plan;
- deployment → re-budget memory; engine release → re-validate flags and defaults, and
  list what the new release changes (specpair.analyse.upgrade);
- SLO → update the SLO dashboard; staging → re-estimate cold start.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from specpair.commands.impact_checklist import as_code, checklist
from specpair.load import file_policy
from specpair.load.project import ADOPTED, Commands
from specpair.load.project import commands as repo_commands
from specpair.model.common import inert
from specpair.model.errors import SpecpairError
from specpair.model.runbook import Runbook
from specpair.resolve.pair import ResolvedPair


@dataclass
class PairImpact:
    name: str
    classes: list[str]
    changes: list[str] = field(default_factory=list)
    checklist: list[str] = field(default_factory=list)
    renamed_from: str | None = None


# --------------------------------------------------------------------------- loading


def git(root: Path, *args: str) -> bytes:
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, check=True).stdout
    except subprocess.CalledProcessError as exc:
        raise SpecpairError.single(root, f"git {' '.join(args)} failed: "
                                   f"{exc.stderr.decode(errors='replace').strip()}",
                                   "check the revision names") from None


def snapshot(root: Path, revision: str, into: Path) -> tuple[Path, list[str]]:
    """The runbooks/ tree of `revision`, written into `into` (an empty tree if absent)
    under the file policy, with what was left out: a committed link (which could point
    anywhere once written) or any entry that is not a plain file is not written, and is
    named instead.

    Read from the tree object itself (`git ls-tree`, then `git cat-file` for the blobs),
    never `git archive`: that applies the revision's own .gitattributes, which a pull
    request writes, so `export-ignore` could hide an added pair or show a changed one
    as removed, and `export-subst` rewrite a file."""
    git(root, "rev-parse", "--verify", f"{revision}^{{commit}}")
    target = into / revision.replace("/", "_")
    (target / "runbooks").mkdir(parents=True, exist_ok=True)
    skipped: list[str] = []
    listing = git(root, "ls-tree", "-r", "-z", "--full-tree", f"{revision}^{{tree}}", "--",
                  "runbooks")
    blobs: list[tuple[PurePosixPath, str]] = []
    for entry in filter(None, listing.split(b"\0")):
        meta, _, raw = entry.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split()
        name = os.fsdecode(raw)
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or path.parts[:1] != ("runbooks",) \
                or len(path.parts) < 2:
            skipped.append(f"{name} at {revision}: a path outside runbooks/")
        elif kind == "blob" and mode in ("100644", "100755"):
            blobs.append((path, oid))
        elif mode == "120000":
            link = git(root, "cat-file", "blob", oid)[:1024].decode(errors="replace")
            skipped.append(f"{name} at {revision}: a symbolic link (to {link}); "
                           f"{file_policy.LINK_HINT}")
        else:  # a submodule (a commit in the tree)
            skipped.append(f"{name} at {revision}: not a file or folder")
    for (path, _), data in zip(blobs, _blobs(root, [oid for _, oid in blobs]), strict=True):
        file_policy.atomic_write(target / path, data)
    return target, skipped


def _blobs(root: Path, oids: list[str]) -> list[bytes]:
    """The contents of `oids`, in order, from one `git cat-file --batch`."""
    if not oids:
        return []
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=root, check=False,
                         input="".join(f"{oid}\n" for oid in oids).encode(),
                         capture_output=True)
    if out.returncode:
        raise SpecpairError.single(root, "git cat-file --batch failed: "
                                   f"{out.stderr.decode(errors='replace').strip()}",
                                   "check the repository (git fsck)")
    data, at, contents = out.stdout, 0, []
    for oid in oids:
        header_end = data.index(b"\n", at)
        header = data[at:header_end].split()
        if len(header) != 3 or header[0].decode() != oid or header[1] != b"blob":
            raise SpecpairError.single(root, f"git cat-file: no blob {oid}",
                                       "check the repository (git fsck)")
        size = int(header[2])
        contents.append(data[header_end + 1:header_end + 1 + size])
        at = header_end + 1 + size + 1  # the content, then a newline
    return contents


@dataclass
class Unresolved:
    """A pair whose runbook loads but does not resolve against its lock (a stale or broken
    lock): its authored spec still says what the change is."""

    runbook: Runbook
    folder: str
    messages: list[str]

    @property
    def stale_lock(self) -> bool:
        return any(STALE_LOCK_MARK in m for m in self.messages)


# resolve() words every runbook/lock disagreement this way
STALE_LOCK_MARK = "the lock is stale"


@dataclass
class Side:
    pairs: dict[str, ResolvedPair] = field(default_factory=dict)
    unresolved: dict[str, Unresolved] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def load_side(root: Path) -> Side:
    from specpair.commands.build import _display
    from specpair.load.runbooks import LOCK_NAME, discover, load_lock, load_runbook
    from specpair.resolve.pair import resolve

    side = Side()
    for path in discover([root / "runbooks"]):
        display = _display(root, path)
        try:
            loaded = load_runbook(path, display)
        except SpecpairError as exc:
            side.problems.append(f"{display}: {exc.problems[0].message}")
            continue
        try:
            lock, _ = load_lock(loaded.folder)
            side.pairs[loaded.name] = resolve(loaded, lock, str(loaded.folder / LOCK_NAME),
                                              display)
        except SpecpairError as exc:
            messages = [problem.message for problem in exc.problems]
            side.unresolved[loaded.name] = Unresolved(
                loaded.runbook, _display(root, loaded.folder), messages)
            side.problems.append(f"{display}: {messages[0]}")
    return side


# --------------------------------------------------------------------------- comparing


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= _flat(f"{prefix}.{key}" if prefix else key, item)
        return out
    return {prefix: value}


def authored_facts(runbook: Runbook) -> dict[str, Any]:
    """What the runbook itself says, flattened to dotted keys."""
    return _flat("", runbook.model_dump(mode="json"))


def facts(pair: ResolvedPair) -> dict[str, Any]:
    """Everything that matters about a pair, flattened to dotted keys."""
    data = pair.runbook.model_dump(mode="json")
    for role in ("target", "draft"):
        art = getattr(pair, role)
        if art is not None:
            resolved = art.model_dump(mode="json", include={"source", "geometry", "weights",
                                                            "tokenizer", "download_bytes"})
            data[f"resolved_{role}"] = resolved
    return _flat("", data)


def classify(key: str) -> str:
    head = key.split(".")[0]
    if head in ("target", "resolved_target"):
        return "target"
    if head in ("draft", "resolved_draft") or key in ("speculation.method",
                                                      "speculation.block_size"):
        return "draft"
    return {"speculation": "speculation", "deployment": "deployment", "geometry": "deployment",
            "engine": "engine", "acceptance": "slo", "staging": "staging",
            "codesign": "codesign", "workloads": "workloads", "pair": "metadata",
            "waivers": "waivers"}.get(head, "metadata")


def _same_artifacts(a: ResolvedPair, b: ResolvedPair) -> bool:
    def key(p: ResolvedPair) -> tuple[Any, ...]:
        return (p.target.source.model_dump_json(),
                p.draft.source.model_dump_json() if p.draft else None)
    return key(a) == key(b)


def _changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[set[str], list[str]]:
    keys = sorted(k for k in set(before) | set(after)
                  if before.get(k) != after.get(k) and k != "pair.name")
    classes = {classify(k) for k in keys}
    if {"target", "draft"} <= classes:
        classes.add("both")
    return classes, [f"{k}: {json.dumps(before.get(k))} → {json.dumps(after.get(k))}"
                     for k in keys]


def _stale_fact(message: str) -> str:
    """"the lock is stale (draft): revision: runbook 'x', lock 'y'" → "draft revision:
    runbook 'x', lock 'y'" (resolve() leaves the role out for the target)."""
    rest = message.split(STALE_LOCK_MARK, 1)[1]
    role = "draft" if rest.startswith(" (draft)") else "target"
    return f"{role} {rest.removeprefix(' (draft)').lstrip(' :')}"


def _unresolved_impact(name: str, base: ResolvedPair | None, head: Unresolved,
                       commands: Commands = ADOPTED) -> PairImpact:
    """A pair that no longer resolves is not a removed pair: say why it does not resolve,
    how to fix it, and what its runbook changes all the same."""
    before = authored_facts(base.runbook) if base is not None else {}
    classes, changes = _changes(before, authored_facts(head.runbook))
    if base is None:
        classes.add("added")
    classes.add("invalid")
    if head.stale_lock:
        classes.add("stale-lock")
        stale = "; ".join(_stale_fact(m) for m in head.messages if STALE_LOCK_MARK in m)
        first = (f"Lock is stale ({stale}): run `specpair lock --refresh {head.folder}` "
                 "where the hub is reachable, or re-declare it offline (`specpair lock "
                 f"--declare {head.folder} --target-config PATH/config.json --target-bytes N "
                 "[--draft-config PATH/config.json --draft-bytes N]`); commit the new "
                 f"lock.json and rebuild ({as_code(commands.build)}); until then this checklist "
                 "covers the runbook only, not budgets or artifacts")
    else:
        first = (f"Pair does not resolve: {head.messages[0]}; fix it before merging "
                 "(`specpair validate` shows every problem)")
    return PairImpact(name, sorted(classes), changes, [first])


def compare(base: dict[str, ResolvedPair], head: dict[str, ResolvedPair],
            unresolved: dict[str, Unresolved] | None = None,
            commands: Commands = ADOPTED) -> list[PairImpact]:
    impacts: list[PairImpact] = []
    unresolved = unresolved or {}
    for name, broken in sorted(unresolved.items()):
        impacts.append(_unresolved_impact(name, base.get(name), broken, commands))
    base = {name: pair for name, pair in base.items() if name not in unresolved}
    removed = sorted(set(base) - set(head))
    added = sorted(set(head) - set(base))
    for new in list(added):
        old = next((o for o in removed if _same_artifacts(base[o], head[new])), None)
        if old is not None:
            removed.remove(old)
            added.remove(new)
            inner = compare({new: base[old]}, {new: head[new]}, commands=commands)
            impact = inner[0] if inner else PairImpact(new, [])
            impact.classes = sorted({"renamed", *impact.classes})
            impact.renamed_from = old
            impact.checklist.insert(0, f"Pair renamed {old} → {new}: update links, dashboards "
                                       "and deployment names")
            impacts.append(impact)
    for name in added:
        impacts.append(PairImpact(name, ["added"], [], [
            "New pair: review the whole two-model plan (budget, co-design, acceptance, "
            "staging) and run the measurement protocol before traffic"]))
    for name in removed:
        impacts.append(PairImpact(name, ["removed"], [], [
            "Pair removed: retire its deployment, dashboards and alerts"]))
    for name in sorted(set(base) & set(head)):
        classes, changes = _changes(facts(base[name]), facts(head[name]))
        if not changes:
            continue
        impacts.append(PairImpact(name, sorted(classes), changes,
                                  checklist(classes, base[name], head[name], commands)))
    return sorted(impacts, key=lambda i: i.name)


def impact(root: Path, base: str, head: str | None) -> tuple[list[PairImpact], list[str]]:
    with tempfile.TemporaryDirectory(prefix="specpair-impact-") as tmp:
        base_root, _ = snapshot(root, base, Path(tmp))
        # a link in the base is left out (its pair reads as far as it can): refusing it
        # would fail every pull request after it, the one that removes the link included;
        # a link at head is the pull request's own problem
        head_root, links = snapshot(root, head, Path(tmp) / "head") if head else (root, [])
        base_side = load_side(base_root)
        head_side = load_side(head_root)
    return (compare(base_side.pairs, head_side.pairs, head_side.unresolved,
                    repo_commands(root)), links + head_side.problems)


# --------------------------------------------------------------------------- output


# What could make runbook text act in Markdown, backslash-escaped (CommonMark lets any
# ASCII punctuation be): emphasis, code spans, links and images (`[`), raw HTML and
# autolinks (`<`, already an entity after html.escape), GFM's strikethrough, and the
# GFM autolinks `https://…` and `www.…` (their `:` and `.` escaped break the match).
# Nothing in it starts a line, so list and heading markers need no escape.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|~]|:(?=//)|(?<=[Ww][Ww][Ww])\.)")
# GitHub makes @name a mention and #12 a link from the rendered text itself, escaped or
# not: a zero-width space after the sign keeps the text as it reads, and inert
_REFERENCE = re.compile(r"([@#])")


def inline(value: object) -> str:
    """Text as inert Markdown on one line: no link, image, mention, HTML or code span can
    start in it, and no block (a heading, a list) after it."""
    escaped = html.escape(inert(re.sub(r"\s+", " ", str(value))), quote=False)
    return _REFERENCE.sub(r"\1&#8203;", _MD_SPECIAL.sub(r"\\\1", escaped))


def code_span(value: object) -> str:
    """Text as one code span that no backtick inside can close: the fence is longer than
    any run of backticks in it (CommonMark), padded where the text starts or ends with
    one."""
    content = inert(" ".join(str(value).split()))
    if not content:
        return ""
    fence = "`" * (max(map(len, re.findall(r"`+", content)), default=0) + 1)
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{fence}{pad}{content}{pad}{fence}"


def prose(line: str) -> str:
    """A checklist line: specpair's words with commands in backticks, and runbook text
    (paths, messages, names) inside both. Every piece comes out as escaped text or as a
    code span of its own, so a backtick in runbook text can shift which pieces are code,
    never open a link or a mention."""
    parts = line.split("`")
    # an odd number of backticks, or two code pieces with nothing between (their fences
    # would run together and pair up differently): runbook text made them, so all is text
    if len(parts) % 2 == 0 or not all(parts[2:-1:2]):
        return inline(line)
    return "".join(code_span(part) if i % 2 else inline(part) for i, part in enumerate(parts))


def markdown(impacts: list[PairImpact], problems: list[str], base: str, head: str | None) -> str:
    """The checklist for a pull request comment and the job summary: every text that comes
    from a runbook, a lock or a revision name is inert (inline, code_span, prose)."""
    out = [f"## specpair impact: {inline(base)} → {inline(head or 'working tree')}\n\n"]
    if problems:
        out.append("**Invalid runbooks at head** (fix before merging):\n\n")
        out += [f"- {prose(p)}\n" for p in problems]
        out.append("\n")
    if not impacts:
        out.append("No impact: no runbook or lock changed in a way that affects a pair.\n")
        return "".join(out)
    for item in impacts:
        label = ", ".join(inline(c) for c in item.classes)
        out.append(f"### {code_span(item.name)} ({label})\n\n")
        out += [f"- [ ] {prose(line)}\n" for line in item.checklist]
        if item.changes:
            out.append("\n<details><summary>What changed</summary>\n\n")
            out += [f"- {code_span(c)}\n" for c in item.changes[:50]]
            if len(item.changes) > 50:
                out.append(f"- … {len(item.changes) - 50} more\n")
            out.append("\n</details>\n")
        out.append("\n")
    return "".join(out)


def as_json(impacts: list[PairImpact], problems: list[str]) -> str:
    return json.dumps({"pairs": [i.__dict__ for i in impacts], "invalid": problems},
                      indent=2, sort_keys=True) + "\n"
