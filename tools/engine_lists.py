"""Write each supported release's `engine_lists.yaml` from the release's own code
(specpair/engines/engine_lists.py says what the lists are).

    PYTHONPATH=src:. <engines venv>/bin/python tools/engine_lists.py

in the engines session's environment (the releases' folders named as for
`nox -s engines`, tests/engine/releases.py). tests/engine/test_copied_decisions.py fails
while a file differs from its release.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.engine import releases, workers

ENGINES = Path(__file__).resolve().parents[1] / "src" / "specpair" / "engines"
# the releases whose decisions are read, and the harness entry reading them
READERS = {**dict.fromkeys(releases.SGLANG, "sglang"), **dict.fromkeys(releases.VLLM, "vllm")}


def render(engine: str, lists: dict[str, object]) -> str:
    head = (f"# {engine}: what the release decides by architecture, read from its own code by\n"
            "# tests/engine/engine_lists.py; written by tools/engine_lists.py, do not edit\n"
            "# (tests/engine/test_copied_decisions.py fails when it differs from the release)\n")
    return head + yaml.safe_dump(json.loads(json.dumps(lists)), sort_keys=True, width=100)


def main() -> None:
    for engine, entry in READERS.items():
        lists = workers.call("engine_lists", entry, releases.env(engine), None, timeout=600)
        name, version = engine.split()
        path = ENGINES / f"{name}_{version.replace('.', '_')}" / "engine_lists.yaml"
        path.write_text(render(engine, lists), encoding="utf-8")
        print(f"wrote {path}")
    workers.close_all()


if __name__ == "__main__":
    main()
