"""The files a release's parser reads for a `specpair verify` case, written where only
that run reads them.

A launch may name files its command reads (`Launch.files`: SGLang's adaptive tier file
for a speculation schedule, which `--speculative-adaptive-config` names and the engine's
speculative step parses). The probe carries them in its case as path → text; here each is
written into a private temporary folder and the argv pointed there, never at the path a
deployment keeps it under (which may be another pair's, or not writable here).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specpair.engines.kv_probe import KvProbe


@contextmanager
def written(probes: list[KvProbe]) -> Iterator[list[KvProbe]]:
    """`probes` with each case's `files` written and its argv naming the copies, for as
    long as the context lasts; probes without files come back as they are."""
    if not any(probe.case.get("files") for probe in probes):
        yield probes
        return
    with tempfile.TemporaryDirectory(prefix="specpair-verify-") as scratch:
        yield [_local(probe, Path(scratch) / str(number))
               for number, probe in enumerate(probes)]


def _local(probe: KvProbe, folder: Path) -> KvProbe:
    files: dict[str, str] = probe.case.get("files") or {}
    if not files:
        return probe
    folder.mkdir()
    moved = {}
    for number, (path, text) in enumerate(sorted(files.items())):
        local = folder / f"{number}-{Path(path).name}"
        local.write_text(text, encoding="utf-8")
        moved[path] = str(local)
    case = {key: value for key, value in probe.case.items() if key != "files"}
    case["argv"] = [moved.get(arg, arg) for arg in case["argv"]]
    return probe.model_copy(update={"case": case})
