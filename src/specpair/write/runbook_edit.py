"""Writing a verified runbook edit (`specpair.load.runbook_edit.plan_edit`) in place."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile

from specpair.load.runbook_edit import EditResult
from specpair.model.errors import SpecpairError


def write_edit(result: EditResult) -> None:
    """Write a verified edit atomically: a temporary file in the same folder, then
    os.replace, so a reader sees the old file or the new one, never half of one."""
    if not result.applied or result.new_text is None:
        raise SpecpairError.single(
            result.path, "the edit was not applied: " + "; ".join(result.reasons),
            "apply the suggested patch by hand, then run `specpair check`")
    target = result.path.resolve()  # through a symlink: replace the file, not the link
    current = target.read_bytes()
    if result.base_sha256 and hashlib.sha256(current).hexdigest() != result.base_sha256:
        raise SpecpairError.single(
            result.path, "the file changed after the edit was planned",
            "run the plan again so the edit is made on the current text")
    mode = stat.S_IMODE(os.stat(target).st_mode)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(result.new_text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise

