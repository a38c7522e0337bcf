"""Running a generated launch script against stand-in engine executables that record their argv."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

HOSTILE = "/models/it's a \"trap\"; touch PWNED; $(touch PWNED2) `touch PWNED3` \\ ${HOME}"


def fake_engine(bin_dir: Path, name: str) -> None:
    """An executable that records its argv as JSON: what the script really passes."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/usr/bin/env python3\nimport json, os, sys\n"
                    "json.dump(sys.argv[1:], open(os.environ['ARGV_OUT'], 'w'))\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def run_script(script: str, tmp_path: Path, engine: str,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "launch.sh"
    path.write_text(script)
    fake_engine(tmp_path / "bin", engine)
    full_env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
                "ARGV_OUT": str(tmp_path / "argv.json"), **(env or {})}
    return subprocess.run(["bash", str(path)], cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, check=False)
