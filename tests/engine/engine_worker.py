"""One long-lived harness process (tests/engine/workers.py starts it): a harness script's
entry function, called once per request, in one release's environment.

    python tests/engine/engine_worker.py SCRIPT ENTRY

imports tests/engine/SCRIPT.py (this folder is first on sys.path, as for the script run
alone) and, for each line of stdin (one JSON payload: what the script reads on stdin when
run alone), answers one line `{"result": ...}` on the protocol channel, the original
stdout; what the harness and the engine print goes to stderr. An exception answers
`{"error": traceback}` and ends the process, so that no request meets the state a failed
one left. A second request is the same as more cases in one run of the script, which
already sizes or parses every case of its input in one process.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def main() -> int:
    script, entry = sys.argv[1], sys.argv[2]
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


if __name__ == "__main__":
    sys.exit(main())
