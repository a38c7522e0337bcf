"""Engine knowledge keyed by (engine, exact version).

Each supported release has its own module with its flag spellings, method names and
memory rules, read from that release's source (../shared/ENGINE_NOTES_*.md). An unknown
version is an error that lists the supported ones: never a silent fallback to another
release's rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specpair.schema.common import Method


@dataclass(frozen=True)
class EngineProfile:
    name: str
    version: str
    method_names: dict[Method, str]
    """How this release spells each supported method on its command line."""
    default_page_size: int
    """Tokens per KV page (SGLang) or block (vLLM) when the runbook leaves it unset."""
    supports_tree_drafts: bool
    notes: dict[Method, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


def _profiles() -> dict[tuple[str, str], EngineProfile]:
    from specpair.engines import sglang_0_5_23, vllm_0_33_0

    return {(p.name, p.version): p for p in (sglang_0_5_23.PROFILE, vllm_0_33_0.PROFILE)}


PROFILES = _profiles()


def supported() -> list[str]:
    return sorted(f"{name} {version}" for name, version in PROFILES)


def get_profile(name: str, version: str) -> EngineProfile | None:
    return PROFILES.get((name, version))
