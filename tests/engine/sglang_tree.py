"""SGLang 0.5.23's own draft-tree selection for EAGLE tree shapes (run by
tests/engine/test_tree_oracle.py).

Reads a JSON list of cases, each `{"topk": k, "steps": s, "num_draft_tokens": n,
"ranks": [[p_0, ..., p_{k-1}] for each step]}`: the draft's probability of its rank-r
candidate at each drafted position, the same for every branch at that position. Answers,
per case, the verified tree as the list of its nodes, each the path of ranks from the
root (rank r at depth j: the draft's r-th candidate at position j).

Everything that selects the nodes is the engine's own code, called as
`EagleWorkerV2.draft_forward` calls it: `spec_utils.select_top_k_tokens` at every step
(step 0 scores the root's top-k children; each later step expands the beam's top-k
children, k² scores, and keeps the top k as the next beam), then
`eagle_utils.organize_draft_results`, which verifies the top `num_draft_tokens − 1` of all
the scores. The draft model's forward between steps is the one stand-in: it returns, for
every beam token, the case's candidate probabilities at the next position and fresh token
ids, so that each selected token id names one node whose path this script records. No
draft model runs, so nothing else is needed.

torch.compile (on `_select_top_k_tokens_later`) is disabled (TORCHDYNAMO_DISABLE, set by
the test): on this CPU host inductor would compile C++; the function's arithmetic is the
same eager.
"""

from __future__ import annotations

import sys
from typing import Any


def _install_torchvision_placeholder() -> None:
    """Once per worker process: the worker is reused across calls, and a finder inserted
    on every call would pile up in sys.meta_path."""
    from stand_ins import TorchvisionStandIn

    if not any(isinstance(f, TorchvisionStandIn) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionStandIn())


class _DraftStandIn:
    """The draft forward's stand-in for one case: per parent token, the case's top-k
    probabilities at the next position and one fresh token id per child, each id
    remembered with its node's path of ranks."""

    def __init__(self, topk: int, ranks: list[list[float]]) -> None:
        self.topk, self.ranks = topk, ranks
        self.path: dict[int, tuple[int, ...]] = {0: ()}  # token 0: the root
        self.next_id = 1

    def children(self, parents: list[int], step: int) -> tuple[Any, Any]:
        import torch

        probs, ids = [], []
        for parent in parents:
            row = []
            for r in range(self.topk):
                self.path[self.next_id] = self.path[parent] + (r,)
                row.append(self.next_id)
                self.next_id += 1
            ids.append(row)
            probs.append(list(self.ranks[step]))
        return (torch.tensor(probs, dtype=torch.float32),
                torch.tensor(ids, dtype=torch.long))


def verified_trees(cases: list[dict[str, Any]]) -> list[list[list[int]]]:
    _install_torchvision_placeholder()
    import torch
    from sglang.srt.speculative.eagle_utils import organize_draft_results
    from sglang.srt.speculative.spec_utils import select_top_k_tokens

    out = []
    for case in cases:
        topk, steps = int(case["topk"]), int(case["steps"])
        draft = _DraftStandIn(topk, case["ranks"])
        topk_p, topk_index = draft.children([0], 0)  # one sequence: the root's children
        hidden = torch.zeros((1, 1), dtype=torch.float32)
        scores = None
        score_list, token_list, parents_list = [], [], []
        for i in range(steps):
            input_ids, hidden, scores, tree_info = select_top_k_tokens(
                i, topk_p, topk_index, hidden, scores, topk)
            score_list.append(tree_info[0])
            token_list.append(tree_info[1])
            parents_list.append(tree_info[2])
            if i == steps - 1:
                break
            topk_p, topk_index = draft.children([int(t) for t in input_ids.tolist()], i + 1)
        _, _, draft_tokens = organize_draft_results(
            score_list, token_list, parents_list, int(case["num_draft_tokens"]))
        out.append(sorted(list(draft.path[int(t)]) for t in draft_tokens[0].tolist()))
    return out
