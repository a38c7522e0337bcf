"""The acceptance-tree mathematics: the tokens a speculative step yields from a chain or
an SGLang draft tree, given the first position's acceptance rate α, the later positions'
decay δ and a lower-ranked sibling's ratio ρ, and the α that yields a given τ."""

from __future__ import annotations

from specpair.model.memo import value_memo


def chain_tau(alpha: float, tokens: int, decay: float = 1.0) -> float:
    """Tokens a step yields when the first drafted token is accepted with probability α
    and each later one, given its predecessors were, with δ·α (δ = `decay`): 1 + α ·
    Σ_{j<n−1} (δα)^j, n = the most tokens a step can yield. δ = 1 is Leviathan et al.
    2023, eq. 1, (1 − α^n) / (1 − α): one acceptance rate at every position."""
    if tokens <= 1:
        return 1.0
    later = decay * alpha
    if later >= 1.0:
        return 1.0 + alpha * (tokens - 1)
    return 1.0 + alpha * (1 - later ** (tokens - 1)) / (1 - later)


def acceptance_rate(tau: float, tokens: int, decay: float = 1.0) -> float:
    """The α at which `chain_tau(α, tokens, decay)` = τ (bisection; τ is increasing in
    α); 1.0 where τ is at or above what full first-position acceptance yields."""
    if tau >= chain_tau(1.0, tokens, decay):
        return 1.0
    if tau <= 1.0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chain_tau(mid, tokens, decay) < tau else (lo, mid)
    return (lo + hi) / 2


def tree_tau(alpha: float, tokens: int, decay: float = 1.0, topk: int = 1,
             draft_tokens: int | None = None, sibling: float = 0.0) -> float:
    """Tokens a step yields (bonus included) from a draft of `tokens` − 1 steps of top-k
    expansion of which the target verifies `draft_tokens` − 1 nodes, as SGLang builds it:
    eagle_utils.select_top_k_tokens keeps a beam of the top-k paths by cumulative draft
    score and expands each into its top-k children (topk + (steps − 1)·topk² candidates),
    organize_draft_results verifies the top num_draft_tokens − 1 of all of them by that
    score. Under greedy verification a node is accepted when every token on its path is the
    target's, and the ranks of one parent's children are exclusive events, so τ = 1 +
    Σ_{verified nodes} Π_{path} c(position, rank) (Sequoia, Chen et al. 2024, section 3:
    a node's acceptance is its path's product of positional acceptances): c = α for the
    first rank at the first position and δ·α at later ones (as `chain_tau`), c = ρ·c(r − 1)
    for rank r ≥ 2 (ρ = `sibling`), no more than what the higher ranks leave of 1 (the
    events are exclusive). The draft's score is taken to order candidates as their
    acceptance does (EAGLE-2, Li et al. 2024, section 3: the draft's confidence
    approximates the acceptance rate), so the verified nodes are the top-N by this
    probability. top-k 1 is `chain_tau`."""
    if topk <= 1:
        return chain_tau(alpha, tokens, decay)
    steps = tokens - 1
    budget = (draft_tokens if draft_tokens is not None else tokens) - 1
    if steps <= 0 or budget <= 0:
        return 1.0

    def ranks(first: float) -> list[float]:
        out = [first]
        for _ in range(topk - 1):
            out.append(min(out[-1] * sibling, 1.0 - sum(out)))
        return out

    beam = ranks(alpha)  # the first step's top-k: the root's children
    pool = list(beam)
    later = ranks(decay * alpha)
    for _ in range(steps - 1):
        children = [b * c for b in beam for c in later]
        pool.extend(children)
        beam = sorted(children, reverse=True)[:topk]
    return 1.0 + sum(sorted(pool, reverse=True)[:budget])


@value_memo  # numbers only: every candidate of a plan asks for the runbook's own again
def tree_acceptance_rate(tau: float, tokens: int, decay: float = 1.0, topk: int = 1,
                         draft_tokens: int | None = None, sibling: float = 0.0) -> float:
    """The α at which `tree_tau` = τ (bisection: τ rises with α, a first rank's gain
    outweighing what its siblings lose); 1.0 at or above full first-rank acceptance."""
    if topk <= 1:
        return acceptance_rate(tau, tokens, decay)
    if tau >= tree_tau(1.0, tokens, decay, topk, draft_tokens, sibling):
        return 1.0
    if tau <= 1.0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        below = tree_tau(mid, tokens, decay, topk, draft_tokens, sibling) < tau
        lo, hi = (mid, hi) if below else (lo, mid)
    return (lo + hi) / 2
