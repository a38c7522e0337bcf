"""Consistency rules of a runbook that relate several fields.

Pydantic checks each value on its own; these rules check that the values make one
coherent deployment (a method with the parameters it needs, parallel sizes that fit the
GPUs, an engine release we know). Each finding names the field it is about, so the error
points at the right line. They run only on a runbook that passed pydantic validation.
"""

from __future__ import annotations

from collections.abc import Callable

from specpair.engines import registry
from specpair.engines.profile import EngineProfile
from specpair.facts import hardware
from specpair.load.document import PathKey, render_dotted
from specpair.load.file_policy import inside_folder
from specpair.model.catalogue import rule_ids, unwaivable
from specpair.model.common import Method
from specpair.model.findings import Finding
from specpair.model.runbook import Artifact, Runbook, TokenRange, Workload
from specpair.model.step_refusals import deployment_refusal

Add = Callable[[PathKey, str, str], None]


def check_runbook(rb: Runbook, folder_name: str | None = None) -> list[Finding]:
    found: list[Finding] = []

    def add(loc: PathKey, message: str, hint: str) -> None:
        found.append(Finding("", "error", message, render_dotted(loc), hint))

    if folder_name is not None and rb.pair.name != folder_name:
        add(("pair", "name"), f"pair name {rb.pair.name!r} differs from its folder "
            f"{folder_name!r}", "name the folder runbooks/<pair.name>/ (or rename the pair)")

    profile = registry.get_profile(rb.engine.name.value, rb.engine.version)
    if profile is None:
        supported = ", ".join(registry.labels())
        add(("engine", "version"), f"{rb.engine.name.value} {rb.engine.version} is not supported "
            f"(specpair supports {supported})", "use one of: " + supported)
    gpu = rb.deployment.gpu
    if isinstance(gpu, str) and hardware.lookup(gpu) is None:
        add(("deployment", "gpu"), f"unknown GPU {gpu!r}", hardware.unknown_hint(gpu))

    _check_artifact(rb.target, ("target",), add, bundled=False)
    method = rb.speculation.method
    if method is Method.NGRAM:
        if rb.draft is not None:
            add(("draft",), "NGRAM drafts from the prompt and takes no draft model",
                "remove the draft section")
    elif rb.draft is None:
        add(("speculation", "method"), f"{method.value} needs a draft",
            "add a draft section (or `draft: {bundled: true}` for layers inside the target)")
    else:
        _check_artifact(rb.draft, ("draft",), add, bundled=rb.draft.bundled)

    _check_speculation(rb, profile, add)
    _check_schedule(rb, add)
    _check_parallel(rb, profile, add)

    roles = ["target"] + ([] if rb.draft is None or rb.draft.bundled else ["draft"])
    if sorted(rb.staging.order) != sorted(roles):
        add(("staging", "order"), f"order {rb.staging.order} must name each artifact once: "
            f"{roles}", f"write order: {roles}")
    if rb.staging.mode == "engine-overlap" and profile and \
            "overlap_weight_loading" not in profile.capabilities:
        add(("staging", "mode"), "engine-overlap is SGLang's --startup-weight-load-mode overlap",
            "use parallel-prestage or serial")

    names = [w.name for w in rb.workloads]
    for i, name in enumerate(names):
        if name in names[:i]:
            add(("workloads", i, "name"), f"duplicate workload name {name!r}", "rename one")
    for i, w in enumerate(rb.workloads):
        replay = w.kind == "replay"
        for key in ("prompts", "max_tokens", "file", "sha256"):
            wanted = (key in ("file", "sha256")) == replay
            if wanted and getattr(w, key) is None:
                add(("workloads", i, key), f"a {w.kind} workload needs {key}",
                    "replay: file (JSONL of requests) and its sha256 (`sha256sum FILE`); "
                    "synthetic: prompts and max_tokens")
            elif not wanted and getattr(w, key) is not None:
                add(("workloads", i, key), f"a {w.kind} workload takes no {key}",
                    "a replay's requests carry their own count and max_tokens; a "
                    "synthetic set reads no file")
        _token_lengths(w, i, add)
        if w.file is not None and not inside_folder(w.file):
            add(("workloads", i, "file"), f"{w.file!r} lies outside the pair's folder",
                "a replay file is committed beside its runbook: a path relative to the "
                "runbook's folder, with no leading / and no ..")
    if rb.workloads and all(w.kind == "replay" for w in rb.workloads):
        add(("workloads",), "only replay workloads: the latency model and the plan size "
            "prompts and answers from synthetic workloads (they do not read replay files)",
            "add a short-homogeneous or long-diverse workload sized like the replayed "
            "traffic; `specpair bench --workloads NAME` runs the replay alone")
    _check_waivers(rb, add)
    return found


def _token_lengths(w: Workload, i: int, add: Add) -> None:
    """A synthetic workload's token lengths: ranges in order, output within max_tokens;
    a replay's requests carry their own."""
    for key in ("prompt_tokens", "output_tokens"):
        value = getattr(w, key)
        if value is None:
            continue
        if w.kind == "replay":
            add(("workloads", i, key), f"a replay workload takes no {key}",
                "a replay's requests carry their own prompts and max_tokens")
        elif isinstance(value, TokenRange) and value.min > value.max:
            add(("workloads", i, key, "min"), f"{key} min {value.min} is above its max "
                f"{value.max}", "swap them")
    out = w.output_tokens
    if out is not None and w.max_tokens is not None and w.kind != "replay":
        top = out if isinstance(out, int) else out.max
        if top > w.max_tokens:
            add(("workloads", i, "output_tokens"), f"output_tokens reaches {top}, above "
                f"max_tokens {w.max_tokens}", "raise max_tokens or lower output_tokens: a "
                "request stops at max_tokens")


def _check_waivers(rb: Runbook, add: Add) -> None:
    known, blocking = rule_ids(), unwaivable()
    rules = [w.rule for w in rb.waivers]
    for i, rule in enumerate(rules):
        if rule in rules[:i]:
            add(("waivers", i, "rule"), f"rule {rule} is waived twice", "keep one waiver")
        elif rule in blocking:
            add(("waivers", i, "rule"), f"{rule} ({blocking[rule]}) cannot be waived: its "
                "finding means the engine will not start or serve",
                "remove the waiver and fix the runbook")
        elif rule not in known:
            add(("waivers", i, "rule"), f"unknown rule {rule}",
                "waive one of the gate's rules: " + ", ".join(known))


def _check_artifact(art: Artifact, loc: PathKey, add: Add, *, bundled: bool) -> None:
    if bundled:
        for key in ("repo", "path", "revision"):
            if getattr(art, key) is not None:
                add((*loc, key), f"a bundled draft has no {key} of its own: it is read from "
                    "the target checkpoint", f"remove {key}")
        return
    if (art.repo is None) == (art.path is None):
        add(loc, "give exactly one of repo (Hugging Face) or path (local directory)",
            "e.g. repo: Qwen/Qwen3-8B with revision: <40-hex commit>")
    if art.repo is not None and art.revision is None:
        add((*loc, "revision"), "a hub artifact needs a pinned revision",
            "add revision: <40-hex commit> (run `specpair lock` to find it)")


def _check_speculation(rb: Runbook, profile: EngineProfile | None, add: Add) -> None:
    spec = rb.speculation
    loc = ("speculation",)
    if profile is not None and spec.method not in profile.method_names:
        add((*loc, "method"), f"{spec.method.value} is not supported by {profile.label}",
            "supported: " + ", ".join(m.value for m in profile.method_names))
    if spec.method.is_block_drafter:
        if spec.block_size is None:
            add((*loc, "block_size"), f"{spec.method.value} needs the draft's block size "
                "spelled out (the engine's fallback silently differs from the checkpoint)",
                "set block_size to the draft config's block_size")
        for key in ("num_steps", "num_draft_tokens", "num_speculative_tokens"):
            if getattr(spec, key) is not None:
                add((*loc, key), f"{spec.method.value} derives {key} from block_size",
                    f"remove {key}")
        if spec.topk != 1:
            add((*loc, "topk"), f"{spec.method.value} drafts a single chain (topk 1)",
                "remove topk")
        return
    if spec.block_size is not None:
        add((*loc, "block_size"), f"block_size applies to DFLASH/DSPARK, not {spec.method.value}",
            "use num_speculative_tokens")
    if spec.topk == 1:
        if spec.num_speculative_tokens is None and spec.num_steps is not None:
            # SGLang's own spelling (--speculative-num-steps/-eagle-topk/-num-draft-tokens)
            add((*loc, "num_steps"), f"a chain (topk 1) is written as num_speculative_tokens; "
                f"num_steps {spec.num_steps} is SGLang's spelling of it",
                f"write num_speculative_tokens: {spec.num_steps} and remove num_steps"
                + (", num_draft_tokens" if spec.num_draft_tokens is not None else "")
                + " (specpair derives SGLang's steps = γ, draft tokens = γ + 1)")
        elif spec.num_speculative_tokens is None:
            add((*loc, "num_speculative_tokens"), f"{spec.method.value} needs "
                "num_speculative_tokens (γ, draft tokens per step)",
                "set it explicitly, e.g. 3 for MTP or 4-6 for EAGLE chains")
        if spec.num_draft_tokens is not None and spec.num_speculative_tokens is not None and (
                spec.num_draft_tokens != spec.num_speculative_tokens + 1):
            add((*loc, "num_draft_tokens"), "with topk 1 the verify width is γ + 1 = "
                f"{spec.num_speculative_tokens + 1}, not {spec.num_draft_tokens}",
                "remove num_draft_tokens")
        if spec.num_steps is not None and spec.num_speculative_tokens is not None and (
                spec.num_steps != spec.num_speculative_tokens):
            add((*loc, "num_steps"), "with topk 1 the number of steps is γ "
                f"({spec.num_speculative_tokens})", "remove num_steps")
    else:
        if profile is not None and not profile.supports_tree_drafts:
            add((*loc, "topk"), f"{profile.label} drafts chains only (no topk > 1)",
                "set topk: 1")
        if spec.method is Method.NGRAM:
            pass
        elif spec.num_steps is None or spec.num_draft_tokens is None:
            add((*loc, "topk"), "a tree draft (topk > 1) needs num_steps and num_draft_tokens",
                "set all three: num_steps, topk, num_draft_tokens")
        else:
            # SGLang 0.5.23 eagle_utils.organize_draft_results: the verify tree takes the
            # best num_draft_tokens - 1 of topk + (steps - 1) * topk^2 candidates with
            # torch.topk, which fails when asked for more than there are
            most = 1 + spec.topk + (spec.num_steps - 1) * spec.topk ** 2
            if spec.num_draft_tokens > most:
                add((*loc, "num_draft_tokens"), f"{spec.num_steps} steps × top-{spec.topk} "
                    f"draft at most {most - 1} candidate tokens, so the verify tree holds at "
                    f"most {most} tokens, not {spec.num_draft_tokens}",
                    f"set num_draft_tokens to at most {most}, or draft more steps")
    if spec.method is not Method.NGRAM and (spec.ngram_min_match or spec.ngram_max_match):
        add((*loc, "ngram_max_match"), "n-gram match sizes apply to NGRAM only", "remove them")
    if (spec.ngram_min_match and spec.ngram_max_match
            and spec.ngram_min_match > spec.ngram_max_match):
        add((*loc, "ngram_min_match"), "ngram_min_match is larger than ngram_max_match",
            "swap them")


def _check_schedule(rb: Runbook, add: Add) -> None:
    """A speculation schedule varies the draft length of a chain up to its γ; ranges
    pinned by hand cover every batch from 1, in order, without overlap (what vLLM's
    `validate_and_normalize_dynamic_sd_schedule` requires; a K above
    num_speculative_tokens would be clamped to it silently)."""
    spec = rb.speculation
    loc: PathKey = ("speculation", "schedule")
    if spec.schedule is None:
        return
    if spec.method.is_block_drafter or spec.topk != 1:
        add(loc, f"a schedule varies the length of a chain draft; {spec.method.value} with "
            f"{'block_size' if spec.method.is_block_drafter else f'topk {spec.topk}'} "
            "drafts a fixed shape", "remove schedule (or use a chain: topk 1)")
        return
    if spec.schedule == "derived":
        dep = rb.deployment
        par = dep.parallel
        refusal = deployment_refusal(par.tensor, par.pipeline, par.expert, dep.gpus_per_node)
        if refusal is not None:  # the same check as the latency model's (`step_inputs`)
            add(loc, f"a derived schedule comes from the step model, which does not model "
                f"this deployment: {refusal.name} ({refusal.reason})",
                "pin the ranges from measurements of the deployed pair "
                "([{start: 1, end: N, k: K}, ...]) or use a static K (`schedule: static`)")
            return
    gamma = spec.num_speculative_tokens
    ranges = spec.schedule
    if not isinstance(ranges, list) or gamma is None:
        return
    if not ranges:
        add(loc, "a pinned schedule needs at least one range",
            "write ranges [{start: 1, end: N, k: K}, ...], or `schedule: derived`")
        return
    expected = 1
    for i, r in enumerate(ranges):
        at: PathKey = (*loc, i)
        if r.start > r.end:
            add((*at, "end"), f"range {i} ends ({r.end}) before it starts ({r.start})",
                f"set end ≥ {r.start}")
        if r.start != expected:
            add((*at, "start"), f"range {i} starts at batch {r.start}; the ranges must cover "
                f"every batch from 1 in order, so it must start at {expected}",
                f"set start: {expected}")
        if r.k > gamma:
            add((*at, "k"), f"k {r.k} exceeds num_speculative_tokens {gamma}: the engine "
                f"would clamp it to {gamma} (and is sized for {gamma})",
                f"use k ≤ {gamma}, or raise num_speculative_tokens")
        expected = max(expected, r.end + 1)


def _check_parallel(rb: Runbook, profile: EngineProfile | None, add: Add) -> None:
    dep = rb.deployment
    par = dep.parallel
    loc = ("deployment", "parallel")
    world = par.tensor * par.pipeline * par.data
    gpus = dep.gpus_per_node * dep.nodes
    if world > gpus:
        add(loc, f"tensor × pipeline × data = {world} ranks, but the deployment has {gpus} GPUs "
            f"({dep.nodes} node(s) × {dep.gpus_per_node})", "lower a parallel size or add nodes")
    if (par.tensor * par.pipeline) % dep.nodes:
        add((*loc, "tensor"), f"tensor × pipeline ({par.tensor * par.pipeline}) must be a "
            f"multiple of nodes ({dep.nodes})", "spread each model replica evenly over nodes")
    if profile is not None and "moe_over_data_parallel" in profile.capabilities:
        if par.expert not in (1, par.tensor * par.data):
            # vLLM has no EP size: --enable-expert-parallel shards the experts over every
            # tensor × data rank (FusedMoEParallelConfig.make: ep_size = tp_size · dp_size)
            add((*loc, "expert"), f"{profile.display_name} has no expert-parallel size of "
                f"its own: expert parallelism spans every tensor × data rank "
                f"({par.tensor} × {par.data} = {par.tensor * par.data}), not {par.expert}",
                f"set expert: {par.tensor * par.data} (expert parallelism on) or 1 (off)")
    elif par.expert > par.tensor or par.tensor % par.expert:
        add((*loc, "expert"), f"expert parallel size {par.expert} must divide tensor "
            f"parallel size {par.tensor}", "use an expert size that divides the TP size")
    if profile is not None:
        capabilities = profile.capabilities
        if "multi_node_data_parallel" not in capabilities and dep.nodes > 1 and par.data > 1:
            add((*loc, "data"), f"{profile.display_name} rejects data parallel replicas across "
                "several nodes", "run one deployment per replica")
        if par.draft_tensor is not None:
            if "draft_tensor_parallel" not in capabilities:
                add((*loc, "draft_tensor"), f"draft_tensor applies to vLLM only "
                    f"({profile.display_name} shards the draft like the target)",
                    "remove draft_tensor")
            elif not profile.draft_tensor_allowed(par.draft_tensor, par.tensor):
                add((*loc, "draft_tensor"), f"{profile.title} accepts draft TP 1 or the target's "
                    f"({par.tensor}), not {par.draft_tensor}", f"use 1 or {par.tensor}")
    if dep.draft_kv_cache_dtype is not None and rb.speculation.method is Method.NGRAM:
        add(("deployment", "draft_kv_cache_dtype"), "NGRAM has no draft KV pool",
            "remove draft_kv_cache_dtype")
