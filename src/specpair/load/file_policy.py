"""The file policy: how specpair touches the repository, in one place.

Runbooks arrive in pull requests, and a pull request can commit symbolic links. A link
under a folder specpair reads or writes would let it read a secret (a token file, a CI
checkout's `.git/config`), read without bound (`/dev/zero`) or write and prune outside
the tree (`generated -> ../../.git`). So, for every path under the repository:

- no link is followed: `lstat` on each component below the tree's top, `O_NOFOLLOW` on
  the open, and a symbolic link anywhere under `runbooks/`, `schema/` or
  `site/docs/pairs/` is an error that names the link;
- only regular files are read, and their size is checked on the open descriptor and
  again while reading (a file that grows, or a device, cannot be read without bound);
- writes are atomic (a temporary file in the same folder, then `os.replace`), folders are
  created one component at a time without following links, and pruning never descends a
  link;
- every I/O failure (a read-only folder, a full disk, a folder where a file belongs)
  becomes a located error, never a traceback.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from specpair.model.errors import Location, Problem, SpecpairError

MAX_FILE_BYTES = 1 << 20
"""A runbook, lock or record is a page of text; anything over 1 MiB is a mistake or an
attack."""

TREES = (Path("runbooks"), Path("schema"), Path("site/docs/pairs"))
"""The folders specpair reads from and writes to; no link may exist anywhere under them."""

LINK_HINT = ("links are not allowed under runbooks/, schema/ or site/docs/pairs/ (they "
             "could read or write outside the repository); commit the file or folder itself")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def io_error(path: Path | str, exc: OSError, doing: str) -> SpecpairError:
    """An OSError as a located error with a hint that fits its cause."""
    hints = {
        errno.ENOSPC: "the disk is full; free space and run again (previous outputs are kept)",
        errno.EDQUOT: "the disk quota is exhausted; free space and run again",
        errno.EROFS: "the file system is read-only; run where the checkout is writable",
        errno.EACCES: "check the permissions of the file and its folder",
        errno.EPERM: "check the permissions of the file and its folder",
        errno.EISDIR: "a folder is where a file belongs; remove or rename the folder",
        errno.ENOTDIR: "a file is where a folder belongs; remove or rename the file",
        errno.ELOOP: LINK_HINT,
        errno.ENOENT: "check the path",
    }
    return SpecpairError.single(path, f"cannot {doing}: {exc.strerror or exc}",
                                hints.get(exc.errno or 0, "check the path and its permissions"))


def _top(path: Path) -> int | None:
    """Index of the component where the policed tree starts in `path` (absolute, not
    resolved): the nearest `runbooks`, `schema` or `site/docs/pairs` folder."""
    parts = path.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("runbooks", "schema"):
            return i
        if parts[i] == "pairs" and parts[max(0, i - 2):i] == ("site", "docs"):
            return i
    return None


def inside_folder(relative: str) -> bool:
    """A path that stays below the folder it is relative to (no root, no `..` above it)."""
    parts = PurePosixPath(relative).parts
    depth = 0
    for part in parts:
        if part.startswith("/") or "\\" in part:
            return False
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return depth > 0


def absolute(path: Path) -> Path:
    """`path` made absolute without resolving links (so a link stays visible)."""
    return Path(os.path.abspath(path))


def check_no_links(path: Path, display: Path | str | None = None) -> None:
    """Refuse a path that passes through a symbolic link inside a policed tree (the tree
    folder itself included). Components that do not exist yet are fine."""
    full = absolute(path)
    top = _top(full)
    if top is None:
        return
    current = Path(*full.parts[:top])
    for part in full.parts[top:]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise io_error(display or current, exc, "inspect the path") from None
        if stat.S_ISLNK(mode):
            raise link_error(current)


WRITE_LINK_HINT = ("specpair never writes through a symbolic link (a committed link could "
                   "point outside the repository); remove the link, or name a path without one")


def link_error(link: Path, hint: str = LINK_HINT) -> SpecpairError:
    try:
        where = os.readlink(link)
    except OSError:
        where = "?"
    return SpecpairError.single(link, f"a symbolic link (to {where})", hint)


def check_below(root: Path, path: Path) -> None:
    """Refuse `path` when it, or a folder between `root` and it, is a symbolic link: what
    lies below `root` (a checkout) is what a pull request commits, `.github -> /elsewhere`
    or `impact.md -> ~/.bashrc` included. `root` itself and the folders above it are the
    user's own choice (`/tmp` is a link on some systems), as is a path outside `root`.
    Components that do not exist yet are fine."""
    base, full = absolute(root), absolute(path)
    try:
        rel = full.relative_to(base)
    except ValueError:
        return
    current = base
    for part in rel.parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise io_error(current, exc, "inspect the path") from None
        if stat.S_ISLNK(mode):
            raise link_error(current, WRITE_LINK_HINT)


def read_bytes(path: Path, limit: int = MAX_FILE_BYTES, display: Path | str | None = None,
               what: str = "a runbook or lock is a small text file; split it or remove "
                           "generated content") -> bytes:
    """The bytes of a regular file, never through a link, never more than `limit`."""
    shown = display or path
    check_no_links(path, shown)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_error(Path(path)) from None
        raise io_error(shown, exc, "read the file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SpecpairError.single(shown, f"{_kind(info.st_mode)}, not a regular file",
                                       "give a file (runbooks, locks and records are files)")
        if info.st_size > limit:
            raise SpecpairError.single(
                shown, f"the file is {info.st_size} bytes; the limit is {limit}", what)
        chunks, total = [], 0
        while True:  # st_size can lie (a file that grows while read): bound the read itself
            chunk = os.read(fd, min(1 << 16, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise SpecpairError.single(
                    shown, f"the file is over {limit} bytes; the limit is {limit}", what)
        return b"".join(chunks)
    except OSError as exc:
        raise io_error(shown, exc, "read the file") from None
    finally:
        os.close(fd)


def _make_dirs(folder: Path) -> None:
    """mkdir -p without following links: every existing component must be a real folder."""
    full = absolute(folder)
    current = Path(full.anchor)
    for part in full.parts[1:]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            try:
                os.mkdir(current)
            except FileExistsError:  # a concurrent writer made it
                mode = os.lstat(current).st_mode
            except OSError as exc:
                raise io_error(current, exc, "create the folder") from None
            else:
                continue
        if stat.S_ISLNK(mode) and _top(current) is not None:
            raise link_error(current)
        if not stat.S_ISDIR(os.stat(current).st_mode):
            raise SpecpairError.single(current, f"{current} is a file, a folder belongs here",
                                       "remove or rename the file")


def atomic_write(path: Path, content: bytes, root: Path | None = None, mode: int = 0o644,
                 durable: bool = False) -> None:
    """Replace `path` with `content`: a reader sees the old or the new bytes, never half.
    With `root` (the repository `init` scaffolds, the folder an `--output` is named in),
    no link between `root` and `path` is followed either (check_below). `mode`: the new
    file's permission bits; `durable`: fsync the content before the replace (a file a
    person wrote, such as a runbook edited in place, not a generated one the next build
    rewrites)."""
    check_no_links(path)
    if root is not None:
        check_below(root, path)
    _make_dirs(path.parent)
    try:
        existing = os.lstat(path).st_mode
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise io_error(path, exc, "write the file") from None
    if existing is not None and not stat.S_ISREG(existing):
        if stat.S_ISLNK(existing):
            raise link_error(path, LINK_HINT if _top(absolute(path)) is not None
                             else WRITE_LINK_HINT)
        raise SpecpairError.single(path, f"{_kind(existing)} is where this file belongs",
                                   "remove or rename it; the build writes a file here")
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise io_error(path, exc, "write the file") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def remove(path: Path) -> None:
    """Unlink one file (never what a link points to: unlink removes the link itself)."""
    check_no_links(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise io_error(path, exc, "remove the file") from None


def walk_files(folder: Path) -> Iterator[Path]:
    """Regular files under `folder`, sorted, never descending a link (links are yielded
    too, so a caller can refuse them; `links_under` is the check)."""
    for directory, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        base = Path(directory)
        for name in sorted(files):
            yield base / name
        for name in dirs:
            if os.path.islink(base / name):
                yield base / name


def links_under(root: Path, trees: tuple[Path, ...] = TREES) -> list[Path]:
    """Every symbolic link in the policed trees of `root`, the tree folders and their
    parents below `root` included (`site -> /elsewhere` counts)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for tree in trees:
        current = root
        blocked = False
        for part in tree.parts:  # the tree's own path: site, site/docs, site/docs/pairs
            current = current / part
            if current in seen:
                continue
            seen.add(current)
            if current.is_symlink():
                found.append(current)
                blocked = True
                break
        if blocked or not current.is_dir():
            continue
        for directory, dirs, files in os.walk(current, followlinks=False):
            base = Path(directory)
            for name in sorted(dirs + files):
                if (base / name).is_symlink():
                    found.append(base / name)
    return sorted(set(found))


def check_tree(root: Path, trees: tuple[Path, ...] = TREES) -> None:
    """Refuse a repository holding a link in a policed tree: one error per link."""
    links = links_under(root, trees)
    if links:
        problems = []
        for link in links:
            shown = os.path.relpath(link, root)
            try:
                where = os.readlink(link)
            except OSError:
                where = "?"
            problems.append(Problem(Location(shown), f"a symbolic link (to {where})",
                                    LINK_HINT))
        raise SpecpairError(problems)
