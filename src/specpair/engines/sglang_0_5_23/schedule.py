"""SGLang 0.5.23's adaptive speculation (`--speculative-adaptive`), as its code runs it.

sglang/srt/speculative/adaptive_spec_params.py: `--speculative-adaptive-config` is a JSON
file whose integer-string keys are batch-size tiers, each with `candidate_steps` (the
step counts, 0 = drafting off, that tier may use) and the controller's knobs; other keys
are defaults for every tier (`{**cfg, **entry}`). A batch is padded to its CUDA-graph batch
size and routed to the tier with the largest key at or below it
(`AdaptiveSpeculativeParams._route`); within a tier `AdaptiveStepSlot` moves between the
candidates by an EMA of the accepted drafts (rise above step − 0.5 + up_hysteresis, drop
at or below the lower step − 0.5 + down_hysteresis), every `update_interval` batches after
`warmup_batches`.

specpair writes one tier per schedule range, keyed by its first batch: its K, and the
depths the step model cannot tell from K there (`ScheduledRange.candidates`), so the
engine's acceptance feedback chooses only where the model cannot. The controller's knobs
are written out at the engine's defaults (`AdaptiveStepSlot.__init__`).

Start-up (`_init_adaptive_speculative_params`, srt/arg_groups/speculative_hook.py): topk
becomes 1, `--speculative-num-steps` must be one of the union of all tiers' candidates
(else ValueError), and num_draft_tokens = steps + 1. Runtime buffers and CUDA graphs are
sized for the largest candidate (`resolve_candidate_steps_from_config` in
ModelRunner.max_decode_logits_rows, EagerRunner's "size to the max"), so specpair passes
the largest candidate as the steps and budgets for it.

Where 0.5.23 turns adaptive off (`adaptive_unsupported_reason`: a warning, then static
steps), specpair refuses: algorithms other than EAGLE/EAGLE3 (NEXTN is EAGLE's alias,
resolved before the check), topk ≠ 1, attention DP, multi-layer EAGLE, two-batch overlap,
PD multiplexing (specpair renders none of the last four).
"""

from __future__ import annotations

import json

from specpair.engines.launch_model import Preflights
from specpair.engines.pair_input import EngineInput
from specpair.engines.sglang_0_5_23.facts import PROFILE

ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")
ALIASES = {"NEXTN": "EAGLE"}  # _resolve_speculative_algorithm_alias
SLOT_DEFAULTS = {"ema_alpha": 0.2, "update_interval": 5, "warmup_batches": 10,
                 "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0}
"""`AdaptiveStepSlot.__init__`'s defaults (cfg.get(..., default)), spelled out."""
CONFIG_DIR = "/tmp/specpair"


def refusal(pair: EngineInput) -> str | None:
    """Why this release cannot run a schedule for the pair (None: it can)."""
    spec = pair.runbook.speculation
    name = PROFILE.method_names.get(spec.method, spec.method.value)
    algorithm = ALIASES.get(name, name)
    where = "sglang/srt/speculative/adaptive_spec_params.py adaptive_unsupported_reason"
    if algorithm not in ADAPTIVE_ALGORITHMS:
        return (f"--speculative-adaptive supports only EAGLE/EAGLE3 (speculative_algorithm="
                f"{name}); the engine falls back to static steps ({where})")
    if spec.topk != 1:
        return (f"--speculative-adaptive supports only topk 1 (speculative_eagle_topk="
                f"{spec.topk}); the engine falls back to static steps ({where})")
    return None


def config_path(pair: EngineInput) -> str:
    return f"{CONFIG_DIR}/{pair.runbook.pair.name}/sglang-adaptive.json"


def adaptive_config(pair: EngineInput) -> dict[str, object]:
    """The `--speculative-adaptive-config` JSON: one tier per schedule range."""
    assert pair.schedule is not None
    config: dict[str, object] = dict(SLOT_DEFAULTS)
    for r in pair.schedule.ranges:
        config[str(r.start)] = {"candidate_steps": sorted({r.k, *r.candidates})}
    return config


def steps(pair: EngineInput) -> int:
    """--speculative-num-steps: the largest candidate (what the engine sizes for)."""
    assert pair.schedule is not None
    return pair.schedule.max_k


def render(pair: EngineInput, checks: Preflights, reason: str | None
           ) -> tuple[list[str], dict[str, str]]:
    """(the adaptive flags, the files they read), or a refusal by name."""
    if pair.runbook.speculation.schedule is None:
        return [], {}
    checks.need(reason is None, "speculation.schedule",
                f"cannot run a speculation schedule: {reason}",
                "remove speculation.schedule (static steps), or change what the engine names")
    if reason is not None or pair.schedule is None:
        return [], {}
    checks.need(pair.schedule.max_k > 0, "speculation.schedule",
                "the schedule never drafts (K = 0 in every range): SGLang's adaptive slots "
                "need a positive step to start from", "serve the target alone instead")
    path = config_path(pair)
    text = json.dumps(adaptive_config(pair), sort_keys=True, indent=2) + "\n"
    return ["--speculative-adaptive", "--speculative-adaptive-config", path], {path: text}
