"""What a launch is, as data: the argv, the environment a node must set (multi-node rank
and address), and pre-flight findings (engine rules that the runbook breaks and that the
engine would only report at start-up). Each engine release builds one (engines/<release>/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specpair.model.catalogue import Severity
from specpair.model.findings import Finding

Preflight = Finding
"""A launch's pre-flight finding is the one finding type."""


@dataclass(frozen=True)
class EnvRef:
    """An argument that each node supplies from its environment (never from the runbook)."""

    name: str


class Preflights(list[Preflight]):
    """The pre-flight findings of one engine release, each prefixed with its name."""

    def __init__(self, engine: str) -> None:
        super().__init__()
        self.engine = engine

    def need(self, ok: bool, field: str, message: str, fix: str,
             severity: Severity = "error") -> None:
        if not ok:
            # the gate reports these as SP901 (errors) and SP902 (warnings)
            self.append(Finding("SP901" if severity == "error" else "SP902", severity,
                                f"{self.engine}: {message}", field, fix))


@dataclass
class Launch:
    engine: str
    argv: list[str | EnvRef]
    node_env: dict[str, str] = field(default_factory=dict)
    """Environment variables each node must set (name → meaning), for multi-node runs."""
    env: dict[str, str] = field(default_factory=dict)
    """Fixed environment for the server process."""
    preflight: list[Preflight] = field(default_factory=list)
    health_path: str = "/health"
    """Answers once the engine is up and while it stays healthy (startup and liveness)."""
    ready_path: str = "/health"
    """Answers while the server should receive requests (readiness)."""
    follower_argv: list[str] = field(default_factory=list)
    """Arguments that nodes other than rank 0 add (multi-node runs)."""
    port: int = 30000
    files: dict[str, str] = field(default_factory=dict)
    """Files the command reads (absolute path → contents, e.g. SGLang's adaptive config):
    the launch script writes them before it starts the server, the manifest mounts them
    from a ConfigMap."""

    @property
    def errors(self) -> list[Preflight]:
        return [p for p in self.preflight if p.severity == "error"]
