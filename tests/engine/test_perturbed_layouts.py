"""No silently wrong budget: every corpus config whose architecture the allowlist budgets,
with one layout-relevant key removed or perturbed at a time, is either refused by
specpair or budgeted exactly as the engine's own pool code sizes it (TP 2, auto KV)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from specpair.engines import verified_layouts
from specpair.model.config_geometry import NotModelled
from specpair.model.errors import SpecpairError
from tests.engine.corpus import CORPUS, NGRAM, CorpusPair, corpus_targets, geometry
from tests.engine.kv_cases import _exact, sglang_cases, vllm_cases

# keys that decide what a layer keeps; each is removed, then perturbed
LAYOUT_KEYS = ("num_key_value_heads", "head_dim", "num_hidden_layers", "num_attention_heads",
               "sliding_window", "layer_types", "attention_chunk_size", "kv_lora_rank",
               "qk_rope_head_dim", "v_head_dim", "full_attention_interval",
               "linear_num_value_heads", "linear_key_head_dim", "no_rope_layers",
               "use_sliding_window", "max_window_layers")


def _perturbed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2
    if isinstance(value, list) and value:
        flipped = list(value)
        flipped[0] = flipped[-1] if flipped[0] != flipped[-1] else "sliding_attention"
        return flipped
    return None


def variants(config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, config) with one key of the decoder's config removed or changed."""
    nested = "text_config" if isinstance(config.get("text_config"), dict) else None
    decoder = config[nested] if nested else config
    found = []
    for key in LAYOUT_KEYS:
        if key not in decoder:
            continue
        for how, value in (("without", None), ("changed", _perturbed(decoder[key]))):
            if how == "changed" and value is None:
                continue
            changed = copy.deepcopy(config)
            target = changed[nested] if nested else changed
            if how == "without":
                del target[key]
            else:
                target[key] = value
            found.append((f"{how}-{key}", changed))
    return found


def test_one_key_off_is_exact_or_refused(tmp_path: Path) -> None:
    pairs: list[CorpusPair] = []
    refused = 0
    for corpus in corpus_targets():
        arch = verified_layouts.layout_architecture(geometry(corpus.target, CORPUS)) \
            if _parses(corpus) else None
        if arch is None or not any(arch in entries
                                   for entries in verified_layouts.verified().values()):
            continue
        config = json.loads((CORPUS / corpus.target / "config.json").read_text())
        for label, changed in variants(config):
            folder = f"{corpus.target}--{label}"
            (tmp_path / folder).mkdir()
            (tmp_path / folder / "config.json").write_text(json.dumps(changed))
            try:
                geometry(folder, tmp_path)
            except (NotModelled, ValueError, KeyError, TypeError):
                refused += 1  # refused when locking, by key or with the missing fact
                continue
            # pair names are slugs of at most 64 characters: number the variants
            pairs.append(CorpusPair(f"variant-{len(pairs)}", folder, None, NGRAM,
                                    root=tmp_path))
    assert len(pairs) + refused >= 100, (len(pairs), refused)
    silent: list[tuple[str, str, str]] = []
    counts: dict[str, dict[str, int]] = {}
    for engine, script, build, env in (
            ("sglang 0.5.23", "sglang_pools.py",
             lambda p: sglang_cases(p, (2,), ("auto",)), None),
            ("vllm 0.33.0", "vllm_kv_plan.py", lambda p: vllm_cases(p, (2,), ("auto",))[0],
             {"PYTHONPATH": __import__("os").environ["SPECPAIR_ENGINE_VLLM_0_33_0"]})):
        cases, calculator_refused = [], 0
        for pair in pairs:
            try:
                cases += build([pair])
            except SpecpairError:
                calculator_refused += 1
        verdicts = _exact(script, cases, env)
        engine_errors = sum(1 for v in verdicts.values() if v and v.startswith("engine error"))
        folder_of = {pair.name: pair.target for pair in pairs}
        for name, verdict in verdicts.items():
            if verdict and not verdict.startswith("engine error"):
                silent.append((engine, folder_of[name.split()[0]], verdict))
        counts[engine] = {"cases": len(verdicts), "exact": sum(v is None for v in
                                                               verdicts.values()),
                          "refused by the calculator": calculator_refused,
                          "engine cannot load": engine_errors}
    print(f"perturbations: {len(pairs) + refused} variants, {refused} refused at lock; "
          + json.dumps(counts))
    assert not silent, json.dumps(silent, indent=1)[:20000]


def _parses(corpus: CorpusPair) -> bool:
    try:
        geometry(corpus.target, CORPUS)
    except (NotModelled, ValueError, KeyError, TypeError):
        return False
    return True


pytestmark = pytest.mark.filterwarnings("ignore")
