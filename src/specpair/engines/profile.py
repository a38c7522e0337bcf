"""What the loader needs to know of a release: its name, method spellings and page size."""

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
