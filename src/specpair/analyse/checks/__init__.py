"""The pre-deployment gate: rules with stable ids over a resolved pair.

Each rule says why it exists: the engine behaviour it mirrors or the class of incident it
prevents. Most of them catch mismatches that the engines accept silently and pay for
later (acceptance collapses, or the first request crashes). A waiver in the runbook
(`waivers: [{rule, reason}]`) keeps a finding visible but stops it from failing the gate.

`gate` holds what a check reads (`Context`), runs the checks and says which findings fail;
one module per rule group holds the checks, each registered with the gate by catalogue id.
Importing the package (as importing `gate` does first) registers every group.
"""

from specpair.analyse.checks import (
    artifacts,
    codesign,
    deployment,
    memory,
    slo,
    startup,
    vocabulary,
)
from specpair.analyse.checks.gate import unregistered

GROUPS = (artifacts, vocabulary, codesign, deployment, memory, slo, startup)
"""The rule groups, in catalogue order: importing them registers their checks."""

_MISSING = unregistered()
assert not _MISSING, f"catalogue rules without a check: {_MISSING}"
