"""The folder holding an artifact's config.json, as the engines read it: what `specpair
verify` hands a release's own code. The checkpoint's own file wherever it can be had (a
local folder, the hub at the locked commit, through huggingface_hub's cache, so a second
run asks no hub), or one the user names."""

from __future__ import annotations

from pathlib import Path

from specpair.model.errors import SpecpairError
from specpair.model.lock import Source
from specpair.model.runbook import Artifact

HINT = ("name the checkpoint's config.json with --{role}-config FILE (a file called "
        "config.json, or the folder holding it)")


def _folder(path: Path, where: str, role: str) -> Path:
    """The folder of a config.json the engines can read: a folder holding one, or the file
    itself when it is called config.json (the engines open `<folder>/config.json`)."""
    folder = path if path.is_dir() else path.parent if path.name == "config.json" else None
    if folder is None:
        raise SpecpairError.single(where, f"{path} is neither a folder nor a file called "
                                   "config.json: the engines read `<folder>/config.json`",
                                   HINT.format(role=role))
    if not (folder / "config.json").is_file():
        raise SpecpairError.single(where, f"no config.json in {folder}", HINT.format(role=role))
    return folder.resolve()


def config_folder(role: str, spec: Artifact, source: Source, named: str | None,
                  offline: bool) -> Path:
    """`role`'s config folder: `named` (the command line), else the runbook's local folder,
    else the hub's config.json at the locked commit (cached; `offline`: the cache alone)."""
    if named is not None:
        return _folder(Path(named), f"--{role}-config", role)
    if spec.path is not None:
        return _folder(Path(spec.path), f"{role}.path", role)
    revision = source.commit or source.revision or spec.revision or "main"
    where = f"hub:{spec.repo}@{revision}"
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    from specpair.lock.hub_remote import bound_hub_answers, call, timeout_s

    if offline:
        try:
            path = hf_hub_download(spec.repo or "", "config.json", revision=revision,
                                   local_files_only=True)
        except LocalEntryNotFoundError:
            raise SpecpairError.single(where, "config.json is not in the local hub cache "
                                       "(offline)", "run once with the hub reachable, or "
                                       + HINT.format(role=role)) from None
    else:
        bound_hub_answers()
        path = call(where, "config.json", lambda: hf_hub_download(
            spec.repo or "", "config.json", revision=revision, etag_timeout=timeout_s()))
    return _folder(Path(path), where, role)
