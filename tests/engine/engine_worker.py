"""One long-lived harness process (tests/engine/workers.py starts it): a harness script's
entry function, called once per request, in one release's environment.

    python tests/engine/engine_worker.py SCRIPT ENTRY

imports tests/engine/SCRIPT.py or src/specpair/engines/harness/SCRIPT.py (both folders first
on sys.path, as for the script run alone, whose own folder is there) and, for each line of
stdin (one JSON payload: what the script reads on stdin when run alone), answers one line
`{"result": ...}` on the protocol channel, the original stdout; what the harness and the
engine print goes to stderr. An exception answers `{"error": traceback}` and ends the
process, so that no request meets the state a failed one left. A second request is the same
as more cases in one run of the script, which already sizes or parses every case of its
input in one process.

    python tests/engine/engine_worker.py --zygote FD MODULE...

imports the MODULEs (the engine's heavy, stand-in-free core: torch, transformers, and for
vLLM vllm.config), then forks one harness process per request received on the Unix
socket FD: a JSON message {"script", "entry"} with the child's stdin, stdout and stderr
passed as file descriptors; it answers the child's pid. The child is what the command
above would be after importing those modules, which every harness script of that engine
imports before any stand-in it installs, so it holds exactly its own script's stand-ins;
the 3-9 s of CPU that importing them costs is paid once per release instead of once per
harness process.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys
import traceback
from pathlib import Path

# the engine-side scripts the product runs too (`specpair verify`), which the harness
# scripts here import by their own names
HARNESS = Path(__file__).resolve().parents[2] / "src" / "specpair" / "engines" / "harness"
sys.path.insert(1, str(HARNESS))


def main(script: str, entry: str) -> int:
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the engines' own prints (and the harness's) must not reach the protocol
    sys.stdout = sys.stderr
    function = getattr(importlib.import_module(script), entry)
    for line in sys.stdin:
        try:
            result = function(json.loads(line))
        except BaseException:  # reported to the test, which fails with it
            protocol.write(json.dumps({"error": traceback.format_exc()[-6000:]}) + "\n")
            protocol.flush()
            return 1
        protocol.write(json.dumps({"result": result}) + "\n")
        protocol.flush()
    return 0


def zygote(control: socket.socket, modules: list[str]) -> int:
    for name in modules:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    while True:
        message, fds, _, _ = socket.recv_fds(control, 65536, 3)
        if not message:
            return 0  # the tests closed the control socket
        request = json.loads(message)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                control.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # as in a process of its own
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                    os.close(fd)
                sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                code = main(request["script"], request["entry"])
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        for fd in fds:
            os.close(fd)
        control.sendall(json.dumps({"pid": pid}).encode() + b"\n")


if __name__ == "__main__":
    if sys.argv[1] == "--zygote":
        sys.exit(zygote(socket.socket(fileno=int(sys.argv[2])), sys.argv[3:]))
    sys.exit(main(sys.argv[1], sys.argv[2]))
