"""Running `specpair lock` against the local hub server, and publishing a folder to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import proc
from tests.support.hubserver import HubServer, Repo, files_of


def lock(root: Path, hub: HubServer | None, *args: str, **env: str
         ) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "HF_HOME": str(root / ".hf"), "HF_HUB_DISABLE_TELEMETRY": "1",
            "SPECPAIR_HUB_BACKOFF_S": "0.01", "SPECPAIR_HUB_TIMEOUT_S": "2",
            "HF_ENDPOINT": hub.url if hub else "http://127.0.0.1:9", **env}
    full.pop("HF_TOKEN", None) if "HF_TOKEN" not in env else None
    return proc.run([sys.executable, "-m", "specpair", "lock", *args], cwd=root,
                          env=full, capture_output=True, text=True, check=False, cpu_s=300)


def publish(hub: HubServer, repo: str, folder: Path, **kw: object) -> str:
    hub.repos[repo] = Repo(**kw)  # type: ignore[arg-type]
    return hub.repos[repo].commit(files_of(folder))
