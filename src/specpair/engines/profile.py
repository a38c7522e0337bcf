"""What the loader needs to know of a release: its name, method spellings and page size."""

from __future__ import annotations

from dataclasses import dataclass, field

from specpair.model.common import Method


@dataclass(frozen=True)
class EngineProfile:
    name: str
    version: str
    method_names: dict[Method, str]
    """How this release spells each supported method on its command line."""
    default_page_size: int
    """Tokens per KV page (SGLang) or block (vLLM) when the runbook leaves it unset."""
    supports_tree_drafts: bool
    display_name: str
    """The engine's name as its project writes it (SGLang, vLLM)."""
    default_port: int
    """The HTTP port the server listens on when the command names none."""
    capabilities: frozenset[str] = frozenset()
    """What the release has that a rule can be about (`RuleSpec.requires`):
    `heterogeneous_vocab` (a draft with its own tokenizer), `draft_tensor_parallel` (a
    draft TP size of its own), `overlap_weight_loading` (a start-up mode that overlaps
    weight loading), `multi_node_data_parallel` (data-parallel replicas across nodes),
    `moe_over_data_parallel` (the MoE layers of the data-parallel ranks form one group of
    tensor × data ranks, and expert parallelism, once on, spans all of them: vLLM's
    `FusedMoEParallelConfig.make`), `score_ranked_tree` (a tree draft verifies the
    num_draft_tokens − 1 nodes of highest cumulative score among every step's top-k
    expansions: SGLang's `spec_utils.select_top_k_tokens` and
    `eagle_utils.organize_draft_results`, the same in 0.5.18 and 0.5.23)."""
    notes: dict[Method, str] = field(default_factory=dict)

    def port(self, declared: int | None) -> int:
        """The port a server of this release listens on: the runbook's, else its own."""
        return self.default_port if declared is None else declared

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    def draft_tensor_allowed(self, draft_tp: int | None, tp: int) -> bool:
        """A draft TP size of its own is 1 or the target's, where the release has one
        (vLLM: 'cannot be other value than 1 or target model tensor_parallel_size')."""
        return draft_tp is None or ("draft_tensor_parallel" in self.capabilities
                                    and draft_tp in (1, tp))

    @property
    def title(self) -> str:
        return f"{self.display_name} {self.version}"
