"""Writing a verified runbook edit (`specpair.load.runbook_edit.plan_edit`) in place,
through the file policy (`specpair.load.file_policy`): no symbolic link is followed, and
the file is replaced atomically."""

from __future__ import annotations

import hashlib
import os
import stat

from specpair.load import file_policy
from specpair.load.runbook_edit import EditResult
from specpair.model.errors import SpecpairError


def write_edit(result: EditResult) -> None:
    """Write a verified edit atomically: a temporary file in the same folder, synced, then
    os.replace, so a reader sees the old file or the new one, never half of one. The file
    keeps its permission bits; a runbook that is (or is reached through) a symbolic link is
    refused, as every read and write under runbooks/ is."""
    if not result.applied or result.new_text is None:
        raise SpecpairError.single(
            result.path, "the edit was not applied: " + "; ".join(result.reasons),
            "apply the suggested patch by hand, then run `specpair check`")
    current = file_policy.read_bytes(result.path)
    if result.base_sha256 and hashlib.sha256(current).hexdigest() != result.base_sha256:
        raise SpecpairError.single(
            result.path, "the file changed after the edit was planned",
            "run the plan again so the edit is made on the current text")
    try:
        mode = stat.S_IMODE(os.lstat(result.path).st_mode)
    except OSError as exc:
        raise file_policy.io_error(result.path, exc, "inspect the file") from None
    file_policy.atomic_write(result.path, result.new_text.encode("utf-8"), mode=mode,
                             durable=True)
