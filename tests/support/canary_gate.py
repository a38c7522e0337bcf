"""The server container's command under the canary gate (specpair.generate.canary_gate):
`bash -c SCRIPT specpair-serve PAIR PORT HEALTH ON_FAILURE CANARY_PORT TIMEOUT N`, then the
engine's argv (N words), then the baseline's. Read here from that documented layout, so a
test that compares the engine's argv with args.json compares the words the wrapper runs."""

from __future__ import annotations

from typing import Any

HEAD = 11  # bash, -c, the script, $0 and the seven values before the argvs


def served(command: list[str]) -> dict[str, Any]:
    assert command[:2] == ["bash", "-c"] and command[3] == "specpair-serve", command[:4]
    assert "canary_gate" in command[2]
    n = int(command[HEAD - 1])
    names = ("pair", "port", "health", "on_failure", "canary_port", "timeout")
    return {**dict(zip(names, command[4:HEAD - 1], strict=True)),
            "engine": command[HEAD:HEAD + n], "baseline": command[HEAD + n:]}
