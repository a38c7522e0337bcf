"""The rule catalogue of the gate: what each rule is, never how it is checked.

A leaf module (it imports nothing of specpair), so the loader can refuse an unknown or
unwaivable waiver without pulling in the gate. The checks (analyse/checks/) register one function
per id; a rule applies to an engine release when the release has the capability the rule
`requires` (`EngineProfile.capabilities`), so no rule compares an engine name.

`stage` names what the rule reads: `lock` (runbook and lock facts), `budget` (the memory
budget), `latency` (the step model), `staging` (the cold-start plan), `launch` (the engine
release's own pre-flight rules), `gate` (the other findings). `baseline` rules also judge
the server without its draft (the planner's baseline candidates): the context, the
target's heads, the baseline budget and the baseline launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "note"]
Stage = Literal["lock", "budget", "latency", "staging", "launch", "gate"]


@dataclass(frozen=True)
class RuleSpec:
    id: str
    name: str
    severity: Severity
    stage: Stage
    title: str
    why: str
    waivable: bool = True
    requires: str | None = None
    """The engine capability the rule is about; None: it applies to every release."""
    baseline: bool = False

    def applies_to(self, capabilities: frozenset[str]) -> bool:
        return self.requires is None or self.requires in capabilities


CATALOGUE: tuple[RuleSpec, ...] = (
    RuleSpec("SP101", "revision-pinned", "error", "lock",
             "Artifact revisions are pinned to commits",
             "A branch or tag moves: the draft and target that were measured together are no "
             "longer the ones that start, and nothing in the launch command shows it."),
    RuleSpec("SP102", "lock-matches", "error", "lock",
             "The lock is present and matches the runbook",
             "Budgets and checks read geometry from the lock; a lock of another repo or revision "
             "describes a different checkpoint."),
    RuleSpec("SP103", "hub-drift", "warning", "lock",
             "Locked branches have not moved on the hub",
             "A moved branch means the next download differs from what was budgeted and measured."),
    RuleSpec("SP104", "facts-confirmed", "warning", "lock",
             "Lock facts are resolved, not declared",
             "Declared facts come from model cards and template configs; unconfirmed ones can be "
             "off by a whole layer or head count."),
    RuleSpec("SP105", "lock-provenance", "error", "lock",
             "Lock provenance is consistent",
             "A hand-written lock that claims hub provenance, or declared facts marked as "
             "confirmed, passes as resolved: the budget and every check then trust numbers no "
             "resolution read."),
    RuleSpec("SP201", "vocab-size", "error", "lock",
             "Target and draft share the vocabulary size",
             "vLLM refuses unequal sizes for draft_model; other methods index the target's "
             "embedding and LM head with draft ids, so a mismatch corrupts or crashes at runtime."),
    RuleSpec("SP202", "tokenizer-match", "error", "lock",
             "Target and draft tokenizers are the same",
             "Equal vocabulary sizes with different tokenizers pass every engine check; acceptance "
             "then collapses because draft ids mean other tokens."),
    RuleSpec("SP203", "vocab-intersection", "error", "lock",
             "The heterogeneous-vocabulary mapping can be built and is not empty",
             "vLLM's VocabMapping raises at start-up when a tokenizer has neither unk nor eos to "
             "map out-of-intersection ids to (vocab_mapping.py `_get_unk_token_id`); an empty "
             "intersection starts but masks every draft logit, so no draft is ever useful.",
             requires="heterogeneous_vocab"),
    RuleSpec("SP204", "vocab-coverage", "warning", "lock",
             "The draft can propose most of the target's tokens",
             "The draft's logits are masked to the intersection: a target token outside it can "
             "never be drafted, which caps acceptance; vLLM itself warns below 100 shared tokens.",
             requires="heterogeneous_vocab"),
    RuleSpec("SP205", "vocab-mapping-note", "note", "lock",
             "The vocabulary intersection is known",
             "The heterogeneous mode drafts only within the intersection; its size and share of "
             "each vocabulary are what the engine logs at start-up.",
             requires="heterogeneous_vocab"),
    RuleSpec("SP207", "vocab-mode-needed", "warning", "lock",
             "The heterogeneous mode is used only for different tokenizers",
             "The mode is not free: vLLM 0.33.0 falls back to the V1 model runner for it and "
             "masks and remaps every draft step; a draft with the target's own tokenizer "
             "needs none of it.",
             requires="heterogeneous_vocab"),
    RuleSpec("SP206", "vocab-tokenizer-revision", "warning", "lock",
             "The mapping's tokenizers are the pinned ones",
             "vLLM 0.33.0 loads both tokenizers for the mapping by name without a revision "
             "(v1/spec_decode/draft_model.py, get_tokenizer): a hub repo's default branch, not "
             "the pinned commit, decides the intersection.",
             requires="heterogeneous_vocab"),
    RuleSpec("SP301", "feature-layers-exist", "error", "lock",
             "Draft feature layers exist in the target",
             "SGLang checks 0 ≤ id < target layers only for DFLASH-style ids; DSPARK's own ids are "
             "taken without that check and fail (or read the wrong features) later."),
    RuleSpec("SP302", "feature-layers-match", "error", "lock",
             "Draft feature layers equal the declared ones",
             "The runbook's co-design hook is the contract of a reviewed pair; a draft that reads "
             "other layers was trained for another target or another revision of it."),
    RuleSpec("SP303", "block-size-match", "error", "lock",
             "The configured block size is the checkpoint's",
             "DSPARK treats block_size as gamma (verify width gamma + 1) and falls back to 7 when "
             "it cannot read the draft config; a block the draft was not trained for lowers "
             "acceptance without an error."),
    RuleSpec("SP304", "hidden-size", "error", "lock",
             "Block drafter hidden size equals the target's",
             "DFLASH/DSPARK drafts reuse the target's embedding and LM head and project K·hidden "
             "features; the engine does not check at start-up and fails on the first request "
             "('target_hidden feature dim mismatch')."),
    RuleSpec("SP305", "mask-token", "error", "lock",
             "The mask token lies inside the target vocabulary",
             "SGLang's DSPARK worker requires mask_token_id < the target's embedding rows; a draft "
             "from another tokenizer fails at worker start."),
    RuleSpec("SP306", "verifier", "error", "lock",
             "The draft's declared verifier is the target",
             "Speculators-format drafts name their verifier; vLLM even swaps the served model to "
             "it when the draft is given as the main model."),
    RuleSpec("SP307", "eagle-hidden-size", "error", "lock",
             "An EAGLE draft's hidden size is the target's",
             "EAGLE and EAGLE-3 drafts take the target's hidden states as input (EAGLE-3 "
             "concatenates three of them into its fc layer, 3 x hidden -> hidden) and share its "
             "embeddings; neither engine compares the sizes at start-up, so the first forward "
             "fails on a shape mismatch."),
    RuleSpec("SP308", "method-supported", "error", "lock",
             "The engine can run the method on the target",
             "EAGLE-3 reads auxiliary hidden states that only some target classes expose; the "
             "engine refuses the pair at model load, after both checkpoints are downloaded.",
             waivable=False),
    RuleSpec("SP309", "draft-method", "error", "lock",
             "The method is the one the draft was trained for",
             "Engines load the draft class its config names whatever the method flag says: an "
             "EAGLE-3 head under EAGLE runs with acceptance near nothing and no error (SGLang), "
             "a DFlash draft under another method accepts about 0%; vLLM refuses some "
             "pairings only at start-up."),
    RuleSpec("SP310", "draft-method-unknown", "warning", "lock",
             "The draft's config says which method it was trained for",
             "SP309 reads the method from the draft's architecture and draft keys; a one-layer "
             "head published under its base architecture (EAGLE or EAGLE-3?) or a draft kind "
             "no method covers leaves the pairing unchecked, and the warning says so."),
    RuleSpec("SP401", "draft-context", "warning", "lock",
             "The draft covers the serving context length",
             "Drafts trained at 2k positions lose acceptance beyond it; vLLM's V2 runner even "
             "lowers the target's max_model_len to the draft's for draft_model."),
    RuleSpec("SP402", "context-positions", "error", "lock",
             "The context length fits the target's position embeddings",
             "SGLang 0.5.23 (ModelConfig._derive_context_length) and vLLM 0.33.0 "
             "(config/model.py _get_and_verify_max_len) raise at start-up when the context "
             "length exceeds what the target config derives (max_position_embeddings, times a "
             "RoPE scaling factor where the engine applies one); both only allow it behind an "
             "environment override (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, "
             "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) that warns of NaNs and out-of-bounds errors.",
             waivable=False, baseline=True),
    RuleSpec("SP501", "tp-heads", "error", "lock",
             "Heads and KV heads of both models fit the TP size",
             "The engines assert head divisibility at start-up, after the weights are downloaded.",
             waivable=False, baseline=True),
    RuleSpec("SP502", "vllm-draft-tp", "error", "lock",
             "vLLM draft TP is 1 or the target's",
             "vLLM 0.33.0 raises 'cannot be other value than 1 or target model "
             "tensor_parallel_size' while building its config.",
             waivable=False, requires="draft_tensor_parallel"),
    RuleSpec("SP601", "memory-fits", "error", "budget",
             "The two-model budget fits",
             "Draft weights and the draft KV pool come out of the same memory; the engine only "
             "finds out after both checkpoints load.",
             waivable=False, baseline=True),
    RuleSpec("SP602", "draft-kv-share", "note", "budget",
             "The draft's share of the KV cache is known",
             "A draft silently eats KV capacity: its pool has as many slots as the target's."),
    RuleSpec("SP603", "layout-verified", "error", "budget",
             "The budget's KV layouts are verified",
             "A layout the KV oracle has not checked against the engine's own pool code was "
             "silently wrong on most families tried (per-block heads, two head geometries, "
             "chunked windows): a declared unverified budget stays visible until waived."),
    RuleSpec("SP604", "layout-refused", "error", "budget",
             "Every KV layout is verified or declared",
             "An architecture the oracle has not verified gets no budget at all unless the runbook "
             "declares it: the gate must not pass a pair whose memory nobody computed.",
             waivable=False),
    RuleSpec("SP605", "engine-agrees", "error", "budget",
             "The pinned release's own code gives the budget's pools",
             "Where the release's own KV sizing (`specpair verify --record`) answered another "
             "figure for this very pair, the budget is wrong and the engine is right: "
             "nothing may deploy on specpair's figure."),
    RuleSpec("SP701", "slo-break-even", "error", "latency",
             "The acceptance SLO clears break-even",
             "Below τ* the pair pays for two models and is slower than the target alone; the "
             "margin absorbs traffic drift."),
    RuleSpec("SP702", "slo-basis", "warning", "latency",
             "The SLO comes from the service's own traffic",
             "A benchmark mean (often code and math) overstates acceptance on chat traffic."),
    RuleSpec("SP703", "latency-not-modelled", "warning", "latency",
             "The latency model represents the deployment",
             "A model replica over more than one node (or expert parallelism wider than one) "
             "crosses links the step model has no figure for: its latency numbers and the "
             "break-even checks are not modelled, not guessed."),
    RuleSpec("SP801", "staging-mode", "error", "staging",
             "The staging mode works with speculation",
             "SGLang 0.5.23 rejects --startup-weight-load-mode overlap with any speculative "
             "algorithm, and only after the target weights have loaded."),
    RuleSpec("SP802", "cold-start", "warning", "staging",
             "Cold start fits the budget",
             "Startup doubles with two artifacts; an autoscaler that waits longer than planned "
             "turns a traffic spike into an outage."),
    RuleSpec("SP901", "engine-rules", "error", "launch",
             "The launch passes the engine's pre-flight rules",
             "Launch-time rejections (unknown flags or keys, impossible combinations) cost a full "
             "model load to discover.",
             waivable=False, baseline=True),
    RuleSpec("SP902", "engine-warnings", "warning", "launch",
             "No engine warning that changes what runs",
             "Warnings such as re-running one MTP layer for several tokens change acceptance "
             "without failing the launch."),
    RuleSpec("SP001", "waiver-used", "warning", "gate",
             "Every waiver waives a finding",
             "A waiver outlives the problem it excused: once the rule stops firing, the waiver "
             "would silently excuse the next, possibly different, finding of that rule."),
)
"""In the order the gate runs them: SP001 comes last, it reads which rules fired."""

BY_ID = {r.id: r for r in CATALOGUE}


def rule_ids() -> list[str]:
    return [r.id for r in CATALOGUE]


def unwaivable() -> dict[str, str]:
    """Rule id → title of the rules whose findings mean the engine will not start."""
    return {r.id: r.title for r in CATALOGUE if not r.waivable}
