"""`specpair init [DIR]`: scaffold a runbook repository that uses specpair.

Everything comes from the installed package (templates/init/), nothing from specpair's
own repository: `specpair.toml` (the pinned release, the git repository CI installs it
from, and the layout), a CI workflow that runs the gate, uploads SARIF (and writes the
findings to the job summary) and posts the change-impact checklist, the site's
`mkdocs.yml` (the Material theme as specpair's own site uses it) and home page,
`.gitignore` entries, and one example pair whose lock is declared as `specpair lock
--declare` declares it (DeepSeek-V3's published config.json; its README's sizes).

Idempotent: a file that is already as the template would write it is left alone; one
that differs is kept unless `--force` (then it is rewritten). `.gitignore` only gains the
entries it lacks. The example pair is added only while `runbooks/` holds no pair, so
running init again in a repository with its own pairs adds nothing.

Under the file policy: a symbolic link where init would read or write (`.github/`,
`site/`, a file it places), `--force` or not, is refused before anything is written;
init never follows one out of the repository.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from specpair import __version__
from specpair.generate.render import dump_json
from specpair.load import file_policy
from specpair.load.project import CONFIG, PLACEHOLDER_SOURCE, installed_source

EXAMPLE = "deepseek-v3-mtp"
# DeepSeek-V3's README: 685B parameters in the FP8 release, 14B of them the MTP module
# (inside the same checkpoint); its config.json is the published one (SOURCES.md of
# specpair's config corpus: ai-dynamo/aiconfigurator @ 095f58a)
EXAMPLE_TARGET_BYTES = 685_000_000_000
EXAMPLE_DRAFT_BYTES = 14_000_000_000

# destination in the new repository → template file in the package
FILES = {
    CONFIG: "specpair.toml",
    ".github/workflows/specpair.yml": "workflow.yml",
    "site/mkdocs.yml": "mkdocs.yml",
    "site/docs/index.md": "index.md",
    # the pages' styles and the offline search shim (iframe-worker 1.0.4, MIT), as
    # specpair's own site has them: the site works opened from disk, with no CDN
    "site/docs/stylesheets/specpair.css": "specpair.css",
    "site/docs/assets/javascripts/iframe-worker/shim.js": "iframe-worker-shim.js",
    "site/docs/assets/javascripts/iframe-worker/LICENSE": "iframe-worker-LICENSE",
}


@dataclass
class InitResult:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)   # differ from the template; no --force
    notes: list[str] = field(default_factory=list)


def template(name: str) -> bytes:
    data = resources.files("specpair").joinpath("templates", "init", name).read_bytes()
    return data.replace(b"@SPECPAIR_VERSION@", __version__.encode()).replace(
        b"@SPECPAIR_SOURCE@", installed_source().encode())


def _place(root: Path, rel: str, content: bytes, force: bool, result: InitResult) -> None:
    path = root / rel
    file_policy.check_below(root, path)  # before reading: a linked file is never compared
    if path.is_file() and file_policy.read_bytes(path, display=rel) == content:
        result.unchanged.append(rel)
    elif path.exists() and not force:
        result.kept.append(rel)
    else:
        file_policy.atomic_write(path, content, root=root)
        result.written.append(rel)


def _gitignore(root: Path, result: InitResult) -> None:
    """Append the entries .gitignore lacks; never remove or reorder the team's own."""
    path = root / ".gitignore"
    wanted = template("gitignore").decode()
    file_policy.check_below(root, path)
    current = file_policy.read_bytes(path, display=".gitignore").decode(
        "utf-8", errors="replace") if path.is_file() else ""
    have = {line.strip() for line in current.splitlines()}
    missing = [line for line in wanted.splitlines()
               if line.strip() and not line.startswith("#") and line.strip() not in have]
    if not missing:
        result.unchanged.append(".gitignore")
        return
    if not current:
        text = wanted
    else:
        text = current + ("" if current.endswith("\n") else "\n") + \
            "# added by `specpair init`\n" + "".join(f"{line}\n" for line in missing)
    file_policy.atomic_write(path, text.encode(), root=root)
    result.written.append(".gitignore")


def _example_lock(runbook: bytes) -> bytes:
    """The example's lock, declared from the packaged config.json as a user would with
    `specpair lock --declare RUNBOOK --target-config config.json --target-bytes N
    --draft-bytes M` (the runbook is read from a scratch folder, so nothing partial is
    left behind when it fails)."""
    from specpair.load.runbooks import load_runbook
    from specpair.lock.declare import declare

    with tempfile.TemporaryDirectory(prefix="specpair-init-") as tmp:
        folder = Path(tmp) / "runbooks" / EXAMPLE
        folder.mkdir(parents=True)
        (folder / "runbook.yaml").write_bytes(runbook)
        config = Path(tmp) / "config.json"
        config.write_bytes(template("deepseek-v3.config.json"))
        lock = declare(load_runbook(folder / "runbook.yaml"), config, EXAMPLE_TARGET_BYTES,
                       None, EXAMPLE_DRAFT_BYTES)
    return dump_json(lock.model_dump(mode="json", exclude_none=True))


def init(root: Path, *, force: bool = False) -> InitResult:
    from specpair.load.runbooks import discover

    result = InitResult()
    root.mkdir(parents=True, exist_ok=True)
    example = f"runbooks/{EXAMPLE}"
    # every link refused before the first write, so a refusal leaves the tree as it was
    for rel in [*FILES, ".gitignore", f"{example}/runbook.yaml", f"{example}/lock.json"]:
        file_policy.check_below(root, root / rel)
    for rel, name in FILES.items():
        _place(root, rel, template(name), force, result)
    if CONFIG in result.written and installed_source() == PLACEHOLDER_SOURCE:
        result.notes.append(f"{CONFIG}: set source to the git repository you install specpair "
                            f"from (CI installs its tag v{__version__}); "
                            f"{PLACEHOLDER_SOURCE} is a placeholder")
    _gitignore(root, result)
    pairs = discover([root / "runbooks"]) if (root / "runbooks").is_dir() else []
    if (root / example).exists() or not pairs:
        runbook = template("runbook.yaml")
        _place(root, f"{example}/runbook.yaml", runbook, force, result)
        _place(root, f"{example}/lock.json", _example_lock(runbook), force, result)
    else:
        result.notes.append("runbooks/ already holds pairs: no example pair added")
    return result
