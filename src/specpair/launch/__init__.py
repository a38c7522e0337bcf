"""Launch commands for each supported engine release, as data (argv) before text.

A builder turns a resolved pair into an `Launch`: the argv, the environment a node must
set (multi-node rank and address), and pre-flight findings: engine rules that the
runbook breaks and that the engine would only report at start-up, or worse, after the
weights have loaded. An error for the runbook's own engine fails the build.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specpair.resolve import ResolvedPair


@dataclass(frozen=True)
class EnvRef:
    """An argument that each node supplies from its environment (never from the runbook)."""

    name: str


@dataclass(frozen=True)
class Preflight:
    field: str
    message: str
    fix: str
    severity: str = "error"  # error | warning


class Preflights(list[Preflight]):
    """The pre-flight findings of one engine release, each prefixed with its name."""

    def __init__(self, engine: str) -> None:
        super().__init__()
        self.engine = engine

    def need(self, ok: bool, field: str, message: str, fix: str,
             severity: str = "error") -> None:
        if not ok:
            self.append(Preflight(field, f"{self.engine}: {message}", fix, severity))


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

    @property
    def errors(self) -> list[Preflight]:
        return [p for p in self.preflight if p.severity == "error"]


def build_for(pair: ResolvedPair, engine: str | None = None, *,
              speculate: bool = True) -> Launch:
    """The launch of `pair` on `engine` (default: the runbook's); `speculate=False` gives
    the baseline: the same server without a draft, for the measurement protocol."""
    from specpair.launch import sglang_0_5_23, vllm_0_33_0

    engine = engine or pair.engine
    if engine == sglang_0_5_23.ENGINE:
        return sglang_0_5_23.build(pair, speculate)
    if engine == vllm_0_33_0.ENGINE:
        return vllm_0_33_0.build(pair, speculate)
    raise KeyError(engine)


ENGINES = ("sglang 0.5.23", "vllm 0.33.0")
