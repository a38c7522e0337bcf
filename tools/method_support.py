"""Write each supported release's `method_support.yaml` from the release's own model
registry: for EAGLE-3, every architecture the registry lists, supported where its model
class exposes auxiliary hidden states (tests/engine/eagle3_support.py asks the engine).

    PYTHONPATH=src:. <engines venv>/bin/python tools/method_support.py

in the engines session's environment (the releases' folders named as for
`nox -s engines`, tests/engine/releases.py). tests/engine/test_method_support.py fails
while a file differs from its release. An architecture whose class does not import here
(a plugin package the release's file needs) is left out: the gate then says the release's
registry, as read, does not list it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.engine import releases

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ROOT / "src" / "specpair" / "engines"
PROBE = ROOT / "tests" / "engine" / "eagle3_support.py"


def answers(engine: str) -> dict[str, bool | None]:
    """architecture → EAGLE-3 support, over the release's whole registry."""
    result = subprocess.run([sys.executable, str(PROBE)],
                            input=json.dumps({"engine": engine.split()[0]}),
                            capture_output=True, text=True, check=False, timeout=1200,
                            env={**os.environ, **releases.env(engine)})
    if result.returncode != 0:
        raise SystemExit(f"{engine}: the probe failed:\n{result.stderr[-4000:]}")
    found: dict[str, bool | None] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def render(engine: str, reason: str, where: str, found: dict[str, bool | None]) -> str:
    head = (f"# {engine}: which target architectures this release can run a method on, from "
            "its\n# own model registry, every architecture it lists (written by "
            "tools/method_support.py,\n# do not edit; tests/engine/test_method_support.py "
            "fails when this file and the engine\n# disagree; see ../README.md, "
            "\"Method support\").\n")
    entry = {"reason": reason, "where": where,
             "supported": sorted(a for a, ok in found.items() if ok),
             "unsupported": sorted(a for a, ok in found.items() if ok is False)}
    return head + yaml.safe_dump({"EAGLE3": entry}, sort_keys=False, width=100,
                                 default_flow_style=None, allow_unicode=True)


def main() -> None:
    for engine in (*releases.SGLANG, *releases.VLLM):
        name, version = engine.split()
        path = ENGINES / f"{name}_{version.replace('.', '_')}" / "method_support.yaml"
        current = yaml.safe_load(path.read_text(encoding="utf-8"))["EAGLE3"]
        path.write_text(render(engine, current["reason"], current["where"], answers(engine)),
                        encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
