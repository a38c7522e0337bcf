"""Files of the package itself that generators copy as they are: the canary's one source
file (specpair/bench/canary_probe.py), which the build writes beside canary.json so a pod
without specpair runs the code `specpair canary` runs."""

from __future__ import annotations

from importlib import resources


def canary_probe_source() -> str:
    return resources.files("specpair.bench").joinpath("canary_probe.py").read_text(
        encoding="utf-8")
