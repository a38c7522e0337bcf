"""The pre-deployment gate: rules with stable ids over a resolved pair.

Each rule says why it exists: the engine behaviour it mirrors or the class of incident it
prevents. Most of them catch mismatches that the engines accept silently and pay for
later (acceptance collapses, or the first request crashes). A waiver in the runbook
(`waivers: [{rule, reason}]`) keeps a finding visible but stops it from failing the gate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from specpair.analyse.budget import compute
from specpair.analyse.latency import LatencyModel, SloCheck, model, slo_check
from specpair.analyse.launch import build_for
from specpair.analyse.schedule import at_depth, attach
from specpair.analyse.staging import StagingPlan, plan
from specpair.analyse.staging_calibration import measured_cold_start
from specpair.analyse.step_inputs import NOT_MODELLED_HINT, not_modelled_text, unmodelled
from specpair.engines import method_support, verified_layouts
from specpair.engines.launch_model import Preflight
from specpair.engines.pair_input import ResolvedArtifact
from specpair.model.budget import Budget
from specpair.model.catalogue import BY_ID, CATALOGUE, RuleSpec, unwaivable
from specpair.model.common import Method
from specpair.model.errors import SpecpairError
from specpair.model.findings import Finding
from specpair.model.lock import RESOLUTION_MAY_LEAVE_UNREAD
from specpair.model.memo import value_memo
from specpair.resolve.pair import ResolvedPair

COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class Context:
    pair: ResolvedPair
    budget: Budget | None = None
    latency: LatencyModel | None = None
    slo: SloCheck | None = None
    """What SP701 reads of `latency`, where the caller (the planner, per candidate) gives
    only that; `latency` wins when both are set."""
    staging: StagingPlan | None = None
    drift: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)  # rules with findings, for SP001
    speculate: bool = True
    """False: judge the server without its draft (the planner's baseline candidates), by
    the catalogue's `baseline` rules only."""
    _preflight: dict[bool, list[Preflight]] = field(default_factory=dict, repr=False)

    def preflight(self, speculate: bool) -> list[Preflight]:
        """The release's own launch checks, rendered once per gate run (SP901 and SP902
        read the same launch; the planner runs the gate for hundreds of candidates)."""
        if speculate not in self._preflight:
            self._preflight[speculate] = build_for(self.pair, speculate=speculate).preflight
        return self._preflight[speculate]


Check = Callable[[Context], Iterator[tuple[str, str, str]]]  # message, field, hint


RULES = CATALOGUE
"""What each rule is (catalogue.py); `_CHECKS` holds how each is found."""

_CHECKS: dict[str, Check] = {}


def rule(id: str) -> Callable[[Check], Check]:
    """Registers the check of catalogue rule `id`."""
    assert id in BY_ID and id not in _CHECKS, id

    def register(fn: Check) -> Check:
        _CHECKS[id] = fn
        return fn
    return register


def _artifacts(ctx: Context) -> Iterator[tuple[str, object]]:
    rb = ctx.pair.runbook
    yield "target", rb.target
    if rb.draft is not None and not rb.draft.bundled:
        yield "draft", rb.draft


# --------------------------------------------------------------------------- artifacts


@rule("SP101")
def _pinned(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for role, art in _artifacts(ctx):
        repo, revision = getattr(art, "repo", None), getattr(art, "revision", None)
        if repo is not None and not COMMIT.match(revision or ""):
            commit = getattr(getattr(ctx.pair, role).source, "commit", None)
            yield (f"{role} {repo} is pinned to {revision!r}, not a commit",
                   f"{role}.revision",
                   f"pin revision: {commit}" if commit else
                   "run `specpair lock` with hub access and pin the commit it resolves")


@rule("SP102")
def _lock(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for problem in ctx.problems:
        yield problem, "target", "run `specpair lock --refresh`"


@rule("SP103")
def _drift(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for drift in ctx.drift:
        yield drift, "target", "review the new commit, then `specpair lock --refresh`"


@rule("SP104")
def _declared(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for role in ("target", "draft"):
        art = getattr(ctx.pair, role)
        if art is not None and art.unconfirmed:
            yield (f"{role} lock facts are declared and unconfirmed: "
                   + ", ".join(art.unconfirmed), role,
                   "run `specpair lock` against the hub to replace them with resolved facts")
    mapping = ctx.pair.vocab_mapping
    if mapping is not None and mapping.unconfirmed:
        yield ("vocabulary intersection facts are declared and unconfirmed: "
               + ", ".join(mapping.unconfirmed), "speculation.heterogeneous_vocab",
               "run `specpair lock` with both tokenizers at hand to compute them")


def provenance_problems(art: ResolvedArtifact) -> list[str]:
    """What makes a lock section's claimed provenance impossible: facts `specpair lock`
    never writes that way, so the section was written or edited by hand."""
    provenance, source = art.provenance, art.source
    problems = []
    if provenance.startswith("hub@"):
        sha = provenance.removeprefix("hub@")
        if source.repo is None:
            problems.append("claims hub provenance but names no repo")
        if source.commit != sha:
            problems.append(f"claims {provenance} but its source commit is {source.commit}")
        if source.revision and COMMIT.match(source.revision) and source.revision != sha:
            problems.append(f"revision {source.revision[:12]} is a commit, yet it claims to "
                            f"have resolved to {sha[:12]}: a commit resolves to itself")
        unexplained = sorted(set(art.unconfirmed) - RESOLUTION_MAY_LEAVE_UNREAD)
        if unexplained:
            problems.append("claims hub provenance but lists unconfirmed facts a resolution "
                            "reads: " + ", ".join(unexplained))
        for part, claimed in (("weights", art.weights.provenance),
                              ("tokenizer", art.tokenizer.provenance)):
            if claimed != provenance:
                problems.append(f"claims {provenance} but its {part} are {claimed}")
    elif provenance == "declared":
        if source.commit is not None and source.commit != source.revision:
            # a pinned commit is its own commit; a branch's commit only the hub can say
            problems.append(f"is declared yet names commit {source.commit[:12]} for "
                            f"revision {source.revision!r}: only a hub resolution can say "
                            "which commit a revision is")
        if not art.unconfirmed:
            problems.append("is declared but lists no unconfirmed facts: every declared fact "
                            "is unconfirmed until a resolution reads it")
    elif provenance == "local" and source.path is None:
        problems.append("claims local provenance but names no path")
    return problems


@rule("SP105")
def _provenance(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    for role in ("target", "draft"):
        art = getattr(p, role)
        if art is None:
            continue
        for problem in provenance_problems(art):
            yield (f"{role} lock section {problem}", role,
                   "write the lock with `specpair lock` (hub or local folder) or "
                   "`specpair lock --declare`, not by hand")


# --------------------------------------------------------------------------- vocabulary


def _heterogeneous(ctx: Context) -> bool:
    """vLLM's heterogeneous-vocabulary mode: the engine maps the two vocabularies itself
    and skips its vocab-size check (vllm/config/speculative.py `_verify_args`)."""
    rb = ctx.pair.runbook
    return rb.speculation.heterogeneous_vocab and \
        "heterogeneous_vocab" in ctx.pair.release.profile.capabilities


@rule("SP201")
def _vocab(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is None or p.draft.bundled or _heterogeneous(ctx):
        return
    t, d = p.target.geometry, p.draft.geometry
    if t.vocab_size != d.vocab_size:
        yield (f"vocab sizes differ: target {t.vocab_size}, draft {d.vocab_size}",
               "draft", "use a draft trained on the target's tokenizer, or, on vLLM with "
               "method STANDALONE, set speculation.heterogeneous_vocab: true (greedy "
               "drafting on the tokens both vocabularies share)")
    if d.draft_vocab_size and d.draft_vocab_size < t.vocab_size and p.runbook.speculation.method \
            is not Method.EAGLE3:
        yield (f"reduced draft vocabulary ({d.draft_vocab_size}) on a "
               f"{p.runbook.speculation.method.value} draft", "draft",
               "reduced ('hot') vocabularies with a token map are an EAGLE-3 feature")
    if d.draft_vocab_size and d.draft_vocab_size > t.vocab_size:
        yield (f"draft_vocab_size {d.draft_vocab_size} is larger than the target vocabulary "
               f"({t.vocab_size}): the draft-to-target token map (d2t) would point past the "
               "target's embedding rows", "draft",
               f"use a draft whose draft_vocab_size is at most {t.vocab_size} (the draft "
               "trained for this target)")


@rule("SP202")
def _tokenizer(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is None or p.draft.bundled or _heterogeneous(ctx):
        return
    t, d = p.target.tokenizer.fingerprint, p.draft.tokenizer.fingerprint
    if t and d and t != d:
        yield (f"tokenizer fingerprints differ ({t[7:19]} vs {d[7:19]})", "draft",
               "drafts must share the target's tokenizer files, or, on vLLM with method "
               "STANDALONE, set speculation.heterogeneous_vocab: true")


COVERAGE_WARN_PCT = 50.0
"""specpair's threshold, not the engine's: below it the draft cannot propose half of the
target's tokens, and every target token outside the intersection is a certain rejection."""


@rule("SP203")
def _intersection(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if not _heterogeneous(ctx) or ctx.pair.draft is None:
        return
    m = ctx.pair.vocab_mapping
    if m is None:
        yield ("the lock has no vocabulary intersection for the heterogeneous mode",
               "speculation.heterogeneous_vocab",
               "run `specpair lock` with both checkpoints' tokenizer files at hand")
        return
    for role, locked in (("target", m.target_tokenizer), ("draft", m.draft_tokenizer)):
        art = getattr(ctx.pair, role)
        current = art.tokenizer.fingerprint if art is not None else None
        if locked and current and locked != current:
            yield (f"the intersection was computed from other {role} tokenizer files "
                   f"({locked[7:19]}, now {current[7:19]})", role,
                   "run `specpair lock` to compute it from the locked tokenizers")
    for role, fallback in (("target", m.target_fallback), ("draft", m.draft_fallback)):
        if fallback is None:
            yield (f"the {role} tokenizer has neither unk_token_id nor eos_token_id: vLLM's "
                   "VocabMapping refuses to start ('cannot safely map out-of-intersection "
                   "tokens')", role, f"set unk_token or eos_token in the {role}'s "
                   "tokenizer_config.json")
    if m.intersection == 0:
        yield ("the two vocabularies share no token after word-start normalisation",
               "draft", "use a draft whose tokenizer overlaps the target's")


@rule("SP204")
def _coverage(ctx: Context) -> Iterator[tuple[str, str, str]]:
    from specpair.lock.vocab import SMALL_INTERSECTION

    m = ctx.pair.vocab_mapping
    if not _heterogeneous(ctx) or m is None or m.intersection == 0:
        return
    if m.intersection < SMALL_INTERSECTION:
        yield (f"very small vocabulary intersection ({m.intersection} tokens; vLLM warns "
               f"below {SMALL_INTERSECTION})", "draft", "use a draft with a closer tokenizer")
    elif m.pct_of_target < COVERAGE_WARN_PCT:
        yield (f"the draft can propose only {m.intersection} of the target's "
               f"{m.target_vocab} tokens ({m.pct_of_target}%)", "draft",
               "measure acceptance on the service's traffic before relying on this pair")
    unmapped = sorted(k for k, ok in m.special_mapped.items() if not ok and " eos " in k)
    if unmapped:
        yield (f"{', '.join(unmapped)} has no draft counterpart: the draft never proposes "
               "the end of a sequence", "draft", "expect a rejection at every sequence end")


@rule("SP205")
def _mapping_note(ctx: Context) -> Iterator[tuple[str, str, str]]:
    m = ctx.pair.vocab_mapping
    if _heterogeneous(ctx) and m is not None:
        size = f"{m.intersection}" + (f"-{m.intersection_max}" if m.intersection_max else "")
        yield (f"VocabMapping: target_vocab={m.target_vocab}, draft_vocab={m.draft_vocab}, "
               f"intersection={size} ({m.pct_of_draft}% of draft, {m.pct_of_target}% of "
               "target)", "speculation.heterogeneous_vocab", "")


@rule("SP207")
def _mode_needed(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if not _heterogeneous(ctx) or p.draft is None:
        return
    t, d = p.target.tokenizer.fingerprint, p.draft.tokenizer.fingerprint
    if t and d and t == d:
        yield ("target and draft share their tokenizer files: the heterogeneous mode is not "
               "needed", "speculation.heterogeneous_vocab", "remove heterogeneous_vocab")


@rule("SP206")
def _mapping_revision(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if not _heterogeneous(ctx):
        return
    for role, art in _artifacts(ctx):
        repo = getattr(art, "repo", None)
        if repo is not None:
            yield (f"{role} {repo}: the engine reads its tokenizer for the "
                   "vocabulary mapping from the default branch", f"{role}.repo",
                   "stage both checkpoints and serve them by path, or confirm the default "
                   "branch holds the locked tokenizer files")


# --------------------------------------------------------------------------- co-design


def _target_ids(ctx: Context) -> list[int] | None:
    return ctx.pair.draft.geometry.target_layer_ids if ctx.pair.draft else None


@rule("SP301")
def _layers_exist(ctx: Context) -> Iterator[tuple[str, str, str]]:
    ids = _target_ids(ctx)
    layers = ctx.pair.target.geometry.num_hidden_layers
    declared = ctx.pair.runbook.codesign.feature_layers
    if ids:
        bad = [i for i in ids if not 0 <= i < layers]
        if bad:
            # the draft's config names them: point at the draft, unless the runbook
            # declares the layers too (then at the declaration a reviewer reads)
            yield (f"draft feature layers {bad} do not exist in the target "
                   f"({layers} layers, ids 0-{layers - 1})",
                   "codesign.feature_layers" if declared is not None else "draft",
                   "pair the draft with the target it was trained on")
    if declared is not None and declared != ids:
        for i, layer in enumerate(declared):
            if layer >= layers:
                yield (f"declared feature layer {layer} does not exist in the target "
                       f"({layers} layers, ids 0-{layers - 1})",
                       f"codesign.feature_layers.{i}",
                       "declare the layers the draft was trained to read (its config's "
                       "target_layer_ids), all below the target's layer count")


@rule("SP302")
def _layers_match(ctx: Context) -> Iterator[tuple[str, str, str]]:
    declared = ctx.pair.runbook.codesign.feature_layers
    ids = _target_ids(ctx)
    if declared is not None and ids is not None and list(ids) != list(declared):
        yield (f"the draft reads target layers {ids}, the runbook declares {declared}",
               "codesign.feature_layers", "fix the runbook or the draft; do not pair blindly")
    if declared is not None and ids is None and ctx.pair.draft is not None:
        yield ("the runbook declares feature layers but the draft config names none",
               "codesign.feature_layers", "check the draft's config (target_layer_ids, or "
               "eagle_config.eagle_aux_hidden_state_layer_ids)")


@rule("SP303")
def _block(ctx: Context) -> Iterator[tuple[str, str, str]]:
    spec = ctx.pair.runbook.speculation
    if not spec.method.is_block_drafter or ctx.pair.draft is None:
        return
    ckpt = ctx.pair.draft.geometry.block_size
    declared = ctx.pair.runbook.codesign.block_size
    if ckpt is not None and spec.block_size != ckpt:
        yield (f"speculation.block_size {spec.block_size} differs from the checkpoint's "
               f"{ckpt}", "speculation.block_size", f"set block_size: {ckpt}")
    if declared is not None and spec.block_size != declared:
        yield (f"speculation.block_size {spec.block_size} differs from codesign.block_size "
               f"{declared}", "codesign.block_size", "make them agree")


@rule("SP304")
def _hidden(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is not None and p.runbook.speculation.method.is_block_drafter and \
            p.draft.geometry.hidden_size != p.target.geometry.hidden_size:
        yield (f"draft hidden size {p.draft.geometry.hidden_size} ≠ target hidden size "
               f"{p.target.geometry.hidden_size}: the first request will fail", "draft",
               "use the draft trained for this target")


@rule("SP305")
def _mask(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is not None and p.draft.geometry.mask_token_id is not None and \
            p.draft.geometry.mask_token_id >= p.target.geometry.vocab_size:
        yield (f"mask token {p.draft.geometry.mask_token_id} is outside the target vocabulary "
               f"({p.target.geometry.vocab_size})", "draft", "use the draft trained for this "
               "target")


@rule("SP306")
def _verifier(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    verifier = p.draft.geometry.verifier if p.draft else None
    target = p.runbook.target.repo or p.runbook.target.path
    if verifier and target and verifier != target:
        yield (f"the draft was built for {verifier}, not {target}", "draft",
               "pair it with its verifier, or retrain it")


@rule("SP307")
def _eagle_hidden(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is None or p.draft.bundled or p.runbook.speculation.method not in (
            Method.EAGLE, Method.EAGLE3):
        return
    t, d = p.target.geometry.hidden_size, p.draft.geometry.hidden_size
    if t != d:
        yield (f"{p.runbook.speculation.method.value} draft hidden size {d} differs from "
               f"the target's {t}: the draft cannot read the target's hidden states",
               "draft", "use the EAGLE draft trained for this target (same hidden size)")


# --------------------------------------------------------------------------- context, parallel


@rule("SP308")
def _method_supported(ctx: Context) -> Iterator[tuple[str, str, str]]:
    method = ctx.pair.runbook.speculation.method
    found = method_support.refusal(ctx.pair.engine, method.value,
                                   verified_layouts.layout_architecture(ctx.pair.target.geometry))
    if found is not None:
        yield found[0], "speculation.method", found[1]


@rule("SP401")
def _context(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    length = p.runbook.deployment.context_length
    if p.draft is not None and not p.draft.bundled and \
            p.draft.geometry.max_position_embeddings < length:
        yield (f"draft max positions {p.draft.geometry.max_position_embeddings} < context "
               f"length {length}", "deployment.context_length",
               "measure acceptance on long prompts, or serve a shorter context")


@rule("SP402")
def _positions(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    length = p.runbook.deployment.context_length
    positions = p.target.geometry.max_position_embeddings
    if length > positions:
        yield (f"context length {length:,} exceeds the target's max_position_embeddings "
               f"({positions:,}): {p.engine} refuses to start ('context_length ({length}) "
               f"is greater than the derived context_length ({positions})')",
               "deployment.context_length",
               f"serve at most context_length: {positions}; if the target's rope_scaling "
               "derives a longer context, declare it as "
               "geometry.target.max_position_embeddings")


@rule("SP501")
def _tp(ctx: Context) -> Iterator[tuple[str, str, str]]:
    from specpair.engines.kv_arithmetic import check_tensor_parallel

    try:
        check_tensor_parallel(ctx.pair, ctx.pair.runbook.deployment.parallel.draft_tensor,
                              with_draft=ctx.speculate)
    except SpecpairError as exc:
        for problem in exc.problems:
            yield problem.message, problem.location.field or "deployment.parallel.tensor", \
                problem.hint


@rule("SP502")
def _draft_tp(ctx: Context) -> Iterator[tuple[str, str, str]]:
    par = ctx.pair.runbook.deployment.parallel
    if not ctx.pair.release.profile.draft_tensor_allowed(par.draft_tensor, par.tensor):
        yield (f"draft TP {par.draft_tensor} with target TP {par.tensor}",
               "deployment.parallel.draft_tensor", f"use 1 or {par.tensor}")


# --------------------------------------------------------------------------- memory, latency


@rule("SP601")
def _fits(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.budget is None:
        return
    scenario = ctx.budget.speculative if ctx.speculate else ctx.budget.baseline
    if scenario is not None and not scenario.fits:
        yield scenario.verdict, "deployment.memory_fraction", "see budget.md"


@rule("SP602")
def _share(ctx: Context) -> Iterator[tuple[str, str, str]]:
    b = ctx.budget
    if b is not None and b.speculative is not None and b.speculative.cell_draft:
        yield (f"the draft holds {b.draft_share_of_kv_pct}% of every token's KV bytes and "
               f"costs {b.capacity_lost_pct}% of the token capacity", "deployment", "")


@rule("SP603")
def _verified(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for note in ctx.budget.unverified if ctx.budget else []:
        yield (note, "deployment.assumptions.unverified_layouts",
               "add the architecture to the KV oracle corpus (its release's "
               "verified_layouts.yaml), "
               "or waive SP603 with the reason the budget is trusted")


@rule("SP604")
def _refused_layout(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.budget is None:
        models = [("target", ctx.pair.target.geometry)]
        if ctx.pair.draft is not None and ctx.pair.runbook.speculation.method is not \
                Method.NGRAM:
            models.append(("draft", ctx.pair.draft.geometry))
        refused, _ = verified_layouts.check(ctx.pair.engine, models,
                                    ctx.pair.runbook.deployment.assumptions.unverified_layouts)
        for u in refused:
            yield u.message + " (no budget computed)", \
                "deployment.assumptions.unverified_layouts", u.hint


@rule("SP701")
def _slo(ctx: Context) -> Iterator[tuple[str, str, str]]:
    latency: LatencyModel | SloCheck | None = ctx.latency if ctx.latency is not None \
        else ctx.slo
    if latency is not None and ctx.pair.runbook.speculation.schedule is not None \
            and ctx.budget is not None:
        # under a schedule the break-even that matters is the one of the K in use there
        pair = attach(ctx.pair, ctx.budget)
        assert pair.schedule is not None
        k = pair.schedule.k_at(latency.concurrency)
        if k == 0:
            return  # the engine drafts nothing at this concurrency
        if k != pair.runbook.speculation.num_speculative_tokens:
            fixed = at_depth(pair, k)
            latency = slo_check(fixed, compute(fixed))  # model's verdict, no curve
    if latency is not None and not latency.slo_ok:
        yield latency.slo_verdict, "acceptance.slo.min_length", \
            "raise the SLO only with measurements, or lower concurrency / use a cheaper draft"


@rule("SP703")
def _not_modelled(ctx: Context) -> Iterator[tuple[str, str, str]]:
    refusal = unmodelled(ctx.pair)
    if refusal is not None:
        yield (not_modelled_text(refusal) + "; the break-even check (SP701) is not run",
               "deployment.parallel", NOT_MODELLED_HINT)


@rule("SP702")
def _basis(ctx: Context) -> Iterator[tuple[str, str, str]]:
    acc = ctx.pair.runbook.acceptance
    copied = acc.reference is not None and acc.slo.min_length == acc.reference.mean_length
    how = ("replay your captured requests (a `kind: replay` workload) with `specpair bench`, "
           "then `specpair slo propose RUNBOOK --write`")
    prov = acc.slo.provenance
    if acc.slo.basis != "own_traffic" or copied:
        yield ((f"the SLO copies the benchmark mean {acc.reference.mean_length}" if copied and
                acc.reference else f"the SLO's basis is {acc.slo.basis}"),
               "acceptance.slo.basis", how)
    elif prov is None:
        yield ("the SLO says own_traffic but names no provenance (record or Prometheus "
               "query)", "acceptance.slo.provenance", how)
    elif acc.slo.min_length > prov.interval_low:
        yield (f"min_length {acc.slo.min_length:g} is above what the traffic supports (the "
               f"low end {prov.interval_low:g} of p{acc.slo.percentile} τ's interval in "
               f"{prov.source} {prov.reference})", "acceptance.slo.min_length",
               "propose again from newer traffic rather than raise it by hand")


# --------------------------------------------------------------------------- staging, engine


@rule("SP801")
def _staging(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.pair.runbook.staging.mode == "engine-overlap":
        yield ("engine-overlap loading cannot be combined with speculation in "
               f"{ctx.pair.engine}", "staging.mode", "use parallel-prestage or engine-prefetch")


@rule("SP802")
def _cold(ctx: Context) -> Iterator[tuple[str, str, str]]:
    if ctx.pair.staging_records:  # a recorded start outranks the model
        yield from measured_cold_start(ctx.pair, ctx.staging or plan(ctx.pair))
        return
    if ctx.staging is not None and not ctx.staging.fits:
        yield ctx.staging.verdict, "staging.cold_start_budget_s", "see staging.md"


@rule("SP901")
def _engine(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for p in ctx.preflight(ctx.speculate):
        if p.severity == "error":
            yield p.message, p.field, p.hint


@rule("SP902")
def _engine_warn(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for p in ctx.preflight(True):
        if p.severity == "warning":
            yield p.message, p.field, p.hint


@rule("SP001")
def _unused_waivers(ctx: Context) -> Iterator[tuple[str, str, str]]:
    for i, waiver in enumerate(ctx.pair.runbook.waivers):
        if waiver.rule not in ctx.fired:
            yield (f"the waiver for {waiver.rule} waives nothing: the rule has no finding "
                   "on this pair", f"waivers.{i}.rule", "remove the waiver")


# --------------------------------------------------------------------------- running


@value_memo  # of the release's capabilities and the mode: the planner runs the gate per
# candidate, over the same rules each time
def _applicable(capabilities: frozenset[str], speculate: bool) -> tuple[RuleSpec, ...]:
    """The rules `run` checks, in catalogue order (SP001 comes last: it reads which rules
    fired)."""
    return tuple(r for r in RULES if r.applies_to(capabilities) and (speculate or r.baseline))


def run(ctx: Context) -> list[Finding]:
    """The findings of every rule that applies to the pair's engine release (with
    `ctx.speculate` False: of the baseline rules, judging the server without its draft)."""
    rb = ctx.pair.runbook
    blocking = unwaivable()
    # validate refuses these waivers; a pair built in memory must not get them either
    waivers = {w.rule: w.reason for w in rb.waivers if w.rule not in blocking}
    if ctx.budget is None and not ctx.problems:
        try:
            ctx.budget = compute(ctx.pair)
            if unmodelled(ctx.pair) is None:  # else SP703 names the refusal
                ctx.latency = model(ctx.pair, ctx.budget)
        except SpecpairError:
            ctx.budget = None  # SP501 reports why
    if ctx.staging is None and ctx.speculate:
        ctx.staging = plan(ctx.pair)
    findings = []
    ctx.fired = set()
    for r in _applicable(ctx.pair.release.profile.capabilities, ctx.speculate):
        for message, field_path, hint in _CHECKS[r.id](ctx):
            ctx.fired.add(r.id)
            findings.append(Finding(r.id, r.severity, message, field_path, hint,
                                    waivers.get(r.id)))
    return findings


def failing(findings: list[Finding], strict: bool = False) -> list[Finding]:
    levels = ("error", "warning") if strict else ("error",)
    return [f for f in findings if f.severity in levels and f.waived is None]


_MISSING = sorted(set(BY_ID) - set(_CHECKS))
assert not _MISSING, f"catalogue rules without a check: {_MISSING}"
