"""`specpair budget --target … --draft …`: a pair's budget and break-even without a runbook.

The flags become a Runbook in memory, validated as a runbook file is (the same model, the
same rules, the same "did you mean"), with every error located on the flag that set the
field. The artifacts resolve through the lock's own code (`lock.hub`, `commands.lock`,
`lock.declare`): a hub repository by range reads within the lock's bounds, a local folder
from its safetensors headers or shard index, or a config.json plus weight bytes the user
states, as `lock --declare` takes them. The resolved pair then goes through the one budget
(`analyse.budget.compute`) and the one step model (`analyse.analysis`) every runbook uses,
so the numbers are those a runbook of the same pair gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from specpair.commands.lock import checkpoint_of, offline_requested
from specpair.engines import registry
from specpair.load import rules
from specpair.load.document import Document
from specpair.load.runbooks import LoadedRunbook, validation_problems
from specpair.lock.declare import bundled_declared, declared_from_text
from specpair.lock.hub import INDEX, bundled_draft, resolve_checkpoint
from specpair.model.errors import Location, Problem, SpecpairError
from specpair.model.findings import path_key
from specpair.model.lock import ArtifactLock, Lock
from specpair.model.runbook import Artifact, Runbook
from specpair.resolve.pair import ResolvedPair, resolve

BUNDLED = "bundled"
"""`--draft bundled`: the draft's layers are inside the target checkpoint (MTP/NEXTN)."""
WHERE = "command line"
PLACEHOLDER_SLO = 1.0
"""The acceptance a runbook needs when --slo is not given: the least τ there is (every
step yields a token), so no gain is claimed for a τ nobody measured."""


@dataclass
class Flags:
    """The one-command budget's options, as the command line gives them."""

    target: str
    engine: str
    method: str
    gpu: str
    tp: int
    draft: str | None = None
    revision: str | None = None
    draft_revision: str | None = None
    kv_dtype: str | None = None
    draft_kv_dtype: str | None = None
    context_length: int | None = None
    memory_fraction: float | None = None
    max_running_requests: int | None = None
    num_speculative_tokens: int | None = None
    block_size: int | None = None
    slo: float | None = None
    target_bytes: int | None = None
    draft_bytes: int | None = None
    sets: list[str] = field(default_factory=list)
    name: str | None = None
    offline: bool = False


# the runbook field each flag sets: a problem with the field is reported on the flag
FLAG_OF = {"engine": "--engine", "speculation.method": "--method", "deployment.gpu": "--gpu",
           "deployment.parallel": "--tp", "target": "--target", "draft": "--draft",
           "deployment.kv_cache_dtype": "--kv-dtype",
           "deployment.draft_kv_cache_dtype": "--draft-kv-dtype",
           "deployment.context_length": "--context-length",
           "deployment.memory_fraction": "--memory-fraction",
           "deployment.max_running_requests": "--max-running-requests",
           "speculation.num_speculative_tokens": "--num-speculative-tokens",
           "speculation.block_size": "--block-size", "acceptance": "--slo",
           "pair.name": "--write-runbook", "target.revision": "--revision",
           "draft.revision": "--draft-revision"}


def flag_of(field_path: str, sets: list[str]) -> str:
    """The flag that set a runbook field: a --set of it or above it, else the longest
    flag-owned prefix (the parallel sizes: only --tp sets one), else the command line."""
    for item in reversed(sets):
        key = item.partition("=")[0]
        if field_path == key or field_path.startswith(key + "."):
            return f"--set {key}"
    parts = field_path.split(".")
    for end in range(len(parts), 0, -1):
        found = FLAG_OF.get(".".join(parts[:end]))
        if found:
            return found
    return WHERE


def _located(problems: list[Problem], sets: list[str]) -> SpecpairError:
    return SpecpairError([Problem(Location(flag_of(p.location.field, sets), 0, 0,
                                           p.location.field), p.message, p.hint)
                          for p in problems])


def _engine(text: str) -> dict[str, str]:
    name, sep, version = text.partition("==")
    if not sep or not name or not version:
        labels = ", ".join(label.replace(" ", "==") for label in registry.labels())
        raise SpecpairError.single("--engine", f"{text!r} is not NAME==VERSION",
                                   f"one of: {labels}")
    return {"name": name, "version": version}


def artifact_fields(text: str, revision: str | None, flag: str) -> dict[str, Any]:
    """A local folder (one that exists, or a path that looks like one) or a hub repo id."""
    path = Path(text)
    if path.is_dir():
        if revision is not None:
            raise SpecpairError.single(flag, f"{text} is a local folder; a revision names "
                                       "a commit of a hub repository", "leave the revision "
                                       "out, or give the hub repository's owner/name")
        return {"path": text}
    if text.startswith((".", "/", "~")) or text.count("/") != 1 or path.exists():
        raise SpecpairError.single(flag, f"{text}: no such checkpoint folder",
                                   "give a folder holding config.json, or a hub repository "
                                   "as owner/name")
    return {"repo": text, "revision": revision or "main"}


def _set(data: dict[str, Any], item: str) -> None:
    key, sep, raw = item.partition("=")
    if not sep or not re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", key):
        raise SpecpairError.single("--set", f"{item!r} is not FIELD=VALUE",
                                   "a runbook field as a dotted path, e.g. "
                                   "--set deployment.linear_state.replay_cache_len=32")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise SpecpairError.single(f"--set {key}", f"{raw!r} is not a YAML value",
                                   "quote it for the shell, e.g. --set 'a.b=[1, 2]'") from None
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise SpecpairError.single(f"--set {key}", f"{part} holds a value, not fields",
                                       "set the field itself")
        node = child
    node[parts[-1]] = value


def runbook_data(flags: Flags, context_length: int) -> dict[str, Any]:
    """The runbook a user would write for these flags: only what they say, everything
    else at the defaults a minimal runbook gets."""
    target = artifact_fields(flags.target, flags.revision, "--target")
    deployment: dict[str, Any] = {"gpu": flags.gpu, "parallel": {"tensor": flags.tp},
                                  "context_length": context_length}
    for key, value in (("kv_cache_dtype", flags.kv_dtype),
                       ("draft_kv_cache_dtype", flags.draft_kv_dtype),
                       ("memory_fraction", flags.memory_fraction),
                       ("max_running_requests", flags.max_running_requests)):
        if value is not None:
            deployment[key] = value
    speculation: dict[str, Any] = {"method": flags.method}
    for key, value in (("num_speculative_tokens", flags.num_speculative_tokens),
                       ("block_size", flags.block_size)):
        if value is not None:
            speculation[key] = value
    name = flags.name or pair_name(target)
    data: dict[str, Any] = {
        "pair": {"name": name, "title": name, "owner": "unowned"},
        "engine": _engine(flags.engine), "target": target, "speculation": speculation,
        "deployment": deployment,
        "acceptance": {"slo": {"min_length": flags.slo or PLACEHOLDER_SLO,
                               "basis": "provisional"}}}
    if flags.draft == BUNDLED:
        if flags.draft_revision is not None:
            raise SpecpairError.single("--draft-revision", "a bundled draft has the "
                                       "target's revision", "leave --draft-revision out")
        data["draft"] = {"bundled": True}
    elif flags.draft is not None:
        data["draft"] = artifact_fields(flags.draft, flags.draft_revision, "--draft")
    if flags.draft is None or flags.draft == BUNDLED:
        # the default order stages a draft download this pair does not have
        data["staging"] = {"order": ["target"]}
    for item in flags.sets:
        _set(data, item)
    return data


def pair_name(target: dict[str, Any]) -> str:
    base = (target.get("repo") or Path(target["path"]).resolve().name).split("/")[-1]
    slug = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")[:63].strip("-")
    return slug or "pair"


def build_runbook(data: dict[str, Any], sets: list[str]) -> Runbook:
    """The runbook model and the rules `validate` applies, located on the flags."""
    document = Document(Path(WHERE), data, "yaml")
    try:
        runbook = Runbook.model_validate(data)
    except ValidationError as exc:
        raise _located(validation_problems(exc, document, Runbook, WHERE), sets) from None
    findings = rules.check_runbook(runbook)
    if findings:
        raise _located([Problem(document.location(path_key(f.field), WHERE), f.message,
                                f.hint) for f in findings], sets)
    return runbook


@dataclass
class QuickPair:
    """What the one-command budget resolved: the runbook and lock a user would commit."""

    data: dict[str, Any]
    runbook: Runbook
    lock: Lock
    pair: ResolvedPair


def quick_pair(flags: Flags) -> QuickPair:
    offline = offline_requested(flags.offline)
    # everything the flags alone decide is refused before any checkpoint is read
    provisional = build_runbook(runbook_data(flags, flags.context_length or 1), flags.sets)
    target, headers = _artifact(provisional.target, flags.target_bytes, offline,
                                "--target", "--target-bytes")
    # unset, the engines serve the model's own maximum context (as a runbook must say)
    data = runbook_data(flags, flags.context_length or target.geometry.max_position_embeddings)
    rb = build_runbook(data, flags.sets)
    draft = None
    if rb.draft is not None and rb.draft.bundled:
        release = registry.get_release(rb.engine.name.value, rb.engine.version)
        assert release is not None, "rules.check_runbook refuses an unsupported release"
        draft = bundled_draft(target, headers, release.draft_mode) if headers else \
            bundled_declared(target, flags.draft_bytes, "--draft-bytes", release.draft_mode)
    elif rb.draft is not None:
        draft, _ = _artifact(rb.draft, flags.draft_bytes, offline, "--draft", "--draft-bytes")
    elif flags.draft_bytes is not None:
        raise SpecpairError.single("--draft-bytes", "the pair has no draft model",
                                   "leave --draft-bytes out")
    lock = Lock(pair=rb.pair.name, target=target, draft=draft)
    loaded = LoadedRunbook(rb, Document(Path(WHERE), data, "yaml"), Path("."))
    try:
        pair = resolve(loaded, lock, "the resolved artifacts", WHERE)
    except SpecpairError as exc:
        raise _located(exc.problems, flags.sets) from None
    return QuickPair(data, rb, lock, pair)


def _artifact(art: Artifact, weight_bytes: int | None, offline: bool, flag: str,
              bytes_flag: str) -> tuple[ArtifactLock, dict[str, dict[str, Any]]]:
    """One artifact as `specpair lock` resolves it, or, with its weight bytes stated, from
    its config.json as `lock --declare` declares it (headers: empty when not read)."""
    try:
        checkpoint = checkpoint_of(art, offline)
        files = checkpoint.files()
        if weight_bytes is not None:
            if "config.json" not in files:
                raise SpecpairError.single(checkpoint.where, "no config.json in the "
                                           "checkpoint", "point at a Hugging Face style "
                                           "checkpoint")
            text = checkpoint.read("config.json").decode("utf-8", "replace")
            source = checkpoint.source
            return declared_from_text(source, text, f"{checkpoint.where}/config.json",
                                      weight_bytes, f"config.json of {checkpoint.where} "
                                      f"with {bytes_flag} (specpair budget)",
                                      draft=flag == "--draft"), {}
        if "config.json" in files and INDEX not in files and \
                not any(f.endswith(".safetensors") for f in files):
            raise SpecpairError.single(
                checkpoint.where, f"the weight bytes are unknown: no .safetensors files and "
                f"no {INDEX}", f"give them with {bytes_flag} N (the model card's size), or "
                f"copy {INDEX} next to config.json")
        return resolve_checkpoint(checkpoint, draft=flag == "--draft")
    except SpecpairError as exc:
        raise SpecpairError([Problem(Location(flag, 0, 0, p.location.render()), p.message,
                                     p.hint) for p in exc.problems]) from None


RUNBOOK_HEAD = ("# yaml-language-server: $schema=../../schema/runbook.schema.json\n"
                "# Written by `specpair budget --write-runbook` from its flags; lock.json "
                "beside it holds\n# the artifacts it resolved. Review every field: only "
                "what the flags said is set.\n")


def runbook_text(data: dict[str, Any]) -> bytes:
    return (RUNBOOK_HEAD + yaml.safe_dump(data, sort_keys=False, allow_unicode=True,
                                          width=100)).encode()


def write_pair(folder: Path, quick: QuickPair) -> list[Path]:
    """DIR/runbook.yaml and DIR/lock.json, through the file policy; a file already there
    with other content is never replaced (both are checked before either is written).
    Returns the files written (none where both already hold this pair)."""
    from specpair.generate.render import dump_json
    from specpair.load.document import MAX_FILE_BYTES
    from specpair.load.runbooks import LOCK_NAME
    from specpair.write.writer import atomic_write, holds, write_readable

    files = {folder / "runbook.yaml": runbook_text(quick.data),
             folder / LOCK_NAME: dump_json(quick.lock.model_dump(mode="json",
                                                                 exclude_none=True))}
    other = [path for path, content in files.items() if holds(path, content) is False]
    if other:
        raise SpecpairError([Problem(Location(str(path)), "exists with other content",
                                     "nothing was written: give --write-runbook a new folder, "
                                     "or remove the file") for path in other])
    if (folder / "runbook.jsonnet").exists():
        raise SpecpairError.single(folder / "runbook.jsonnet", "the folder holds a Jsonnet "
                                   "runbook", "give --write-runbook a new folder")
    written = [path for path, content in files.items() if holds(path, content) is None]
    for path in written:
        if path.name == LOCK_NAME:
            write_readable(path, files[path], MAX_FILE_BYTES, "lock")
        else:
            atomic_write(path, files[path])
    return written
