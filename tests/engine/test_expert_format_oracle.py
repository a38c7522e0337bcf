"""vLLM's own expert weights as the oracle for specpair's bytes per routed-expert parameter
(nox -s engines).

The step model reads a MoE's routed experts at `geometry.EXPERT_FORMAT_BYTES` of their
format (values and block scales), a table written from the formats' specifications. Here
every vendored config whose experts' format specpair reads (fp8, mxfp4, ModelOpt NVFP4)
goes through vLLM 0.33.0's own quantization config and fused-MoE `create_weights`
(tests/engine/vllm_expert_formats.py), which allocate what the engine loads the checkpoint
into: the table must give the bytes vLLM allocates per expert parameter, for every config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specpair.model.config_geometry import NotModelled, from_hf_config
from specpair.model.geometry import EXPERT_FORMAT_BYTES
from tests.engine import releases, workers

REPO = Path(__file__).resolve().parents[2]
FOLDERS = sorted((REPO / "tests" / "fixtures" / "corpus").iterdir()) \
    + sorted((REPO / "tests" / "fixtures" / "configs").iterdir())
RELEASE = "vllm 0.33.0"
EXPERTS = 2  # bytes per parameter do not depend on the count; two keep the tensors small


def _cases() -> list[dict[str, Any]]:
    cases, seen = [], set()
    for folder in FOLDERS:
        path = folder / "config.json"
        if not path.is_file() or folder.name in seen:  # a config vendored twice: once
            continue
        seen.add(folder.name)
        config = json.loads(path.read_text())
        try:
            g = from_hf_config(config)
        except (NotModelled, ValueError, KeyError):  # refused by name, by transformers'
            continue  # own config class, or a key missing (what `specpair lock` refuses)
        if g.moe is None or g.moe.weight_format is None:
            continue
        quant = config.get("quantization_config") or config.get("text_config", {}).get(
            "quantization_config")
        cases.append({"folder": folder.name, "format": g.moe.weight_format,
                      "quantization_config": quant, "experts": EXPERTS,
                      "hidden": g.hidden_size,
                      "intermediate": g.moe.expert_params // (3 * g.hidden_size)})
    return cases


def test_every_read_expert_format_is_what_vllm_allocates() -> None:
    cases = _cases()
    # the collection holds all three formats; a test over none of one would pass vacuously
    assert {c["format"] for c in cases} == set(EXPERT_FORMAT_BYTES), cases
    answers = workers.call("vllm_expert_formats", "bytes_per_param", releases.env(RELEASE),
                           cases, timeout=600)
    assert len(answers) == len(cases)
    wrong = [(c["folder"], c["format"], a["bytes_per_param"])
             for c, a in zip(cases, answers, strict=True)
             if abs(a["bytes_per_param"] / EXPERT_FORMAT_BYTES[c["format"]] - 1) > 1e-4]
    assert not wrong, wrong
