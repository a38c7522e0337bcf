"""Runbook variants of the example pairs and how specpair and the engines' startup checks
judge them."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specpair.analyse.checks.gate import failing
from specpair.analyse.launch import EnvRef, build_for
from specpair.commands.check import check
from specpair.load.document import load_document
from specpair.load.runbooks import LoadedRunbook, load_lock
from specpair.lock.hub import LocalCheckpoint, resolve_checkpoint
from specpair.model.errors import SpecpairError
from specpair.model.lock import Lock
from specpair.model.runbook import Runbook
from specpair.resolve.pair import resolve
from tests.engine import releases, workers
from tests.engine.support import REPO

CONFIGS = REPO / "tests" / "fixtures" / "configs"


@dataclass(frozen=True)
class Base:
    example: str
    target: str
    draft: str
    target_bytes: int  # declared sizes: the budget needs some, the engines none
    draft_bytes: int


BASES = {
    "qwen3-8b-dflash": Base("runbooks/qwen3-8b-dflash/runbook.jsonnet", "Qwen__Qwen3-8B",
                            "sgl-project__SpecForge-qwen3-8b-dflash", 16_400_000_000,
                            2_100_000_000),
    "llama31-8b-eagle3": Base("runbooks/llama31-8b-eagle3/runbook.jsonnet",
                              "meta-llama__Llama-3.1-8B-Instruct",
                              "sgl-project__SpecForge-llama3-8B-eagle3", 16_100_000_000,
                              800_000_000),
    "llama-eagle3-vllm": Base("runbooks/llama33-70b-eagle3-vllm/runbook.yaml",
                              "meta-llama__Llama-3.1-8B-Instruct",
                              "sgl-project__SpecForge-llama3-8B-eagle3", 16_100_000_000,
                              800_000_000),
    # the same pair pinned to vllm 0.32.0 (its example), checked by 0.32.0's own start-up
    "llama-eagle3-vllm-0.32.0": Base("runbooks/llama33-70b-eagle3-vllm-0-32-0/runbook.yaml",
                                     "meta-llama__Llama-3.1-8B-Instruct",
                                     "sgl-project__SpecForge-llama3-8B-eagle3",
                                     16_100_000_000, 800_000_000),
    # the same pair pinned to vllm 0.34.0 (its example, KV bytes pinned), by 0.34.0's code
    "llama-eagle3-vllm-0.34.0": Base("runbooks/llama33-70b-eagle3-vllm-0-34-0/runbook.yaml",
                                     "meta-llama__Llama-3.1-8B-Instruct",
                                     "sgl-project__SpecForge-llama3-8B-eagle3",
                                     16_100_000_000, 800_000_000),
}


@dataclass(frozen=True)
class Variant:
    name: str
    base: str
    runbook: dict[str, Any] = field(default_factory=dict)  # deep-merged into the runbook
    target_config: dict[str, Any] = field(default_factory=dict)  # merged into config.json
    draft_config: dict[str, Any] = field(default_factory=dict)
    gate_says: str = ""  # a rule id or words the gate's failure must contain, if it fails
    engine_says: str = ""  # words of the engine's refusal, where an engine refuses


def merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def checkpoint(folder: Path, config_name: str, edit: dict[str, Any], size: int) -> Path:
    """A folder as `specpair lock` and the engines read it: the real config.json (edited
    by the variant) and a shard index whose total_size gives the weight bytes."""
    folder.mkdir(parents=True)
    config = json.loads((CONFIGS / config_name / "config.json").read_text())
    merge(config, edit)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": size}, "weight_map": {}}))
    return folder


@dataclass
class Outcome:
    variant: Variant
    gate_failed: bool
    gate_text: str
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)  # engine → argv/env
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)


def runbook_data(base: Base, target: Path, draft: Path, update: dict[str, Any]
                 ) -> dict[str, Any]:
    data: dict[str, Any] = load_document(REPO / base.example, REPO / "runbooks").data
    data["pair"]["name"] = "oracle"
    data["target"] = {k: v for k, v in data["target"].items()
                      if k not in ("repo", "revision")} | {"path": str(target)}
    data["draft"] = {k: v for k, v in data["draft"].items()
                     if k not in ("repo", "revision")} | {"path": str(draft)}
    # hub pinning and declared facts do not apply to local folders
    data["waivers"] = [w for w in data.get("waivers", [])
                       if w["rule"] not in ("SP101", "SP104")]
    merge(data, update)
    return data


def evaluate(variant: Variant, root: Path) -> Outcome:
    base = BASES[variant.base]
    target = checkpoint(root / "ckpt" / "target", base.target, variant.target_config,
                        base.target_bytes)
    draft = checkpoint(root / "ckpt" / "draft", base.draft, variant.draft_config,
                       base.draft_bytes)
    data = runbook_data(base, target, draft, variant.runbook)
    folder = root / "runbooks" / "oracle"
    folder.mkdir(parents=True)
    path = folder / "runbook.yaml"
    path.write_text(json.dumps(data, indent=2))  # JSON is YAML
    texts: list[str] = []
    try:  # the lock, as `specpair lock` writes it from these folders
        t, _ = resolve_checkpoint(LocalCheckpoint(target, str(target)))
        d, _ = resolve_checkpoint(LocalCheckpoint(draft, str(draft)), draft=True)
        (folder / "lock.json").write_text(json.dumps(Lock(pair="oracle", target=t, draft=d)
                                                     .model_dump(mode="json")))
    except SpecpairError as exc:
        texts += [f"lock: {p.message}" for p in exc.problems]
    try:
        reports = check(root, [path])
        for report in reports:
            texts += [f"{f.rule}: {f.message}" for f in failing(report.findings)]
    except SpecpairError as exc:  # validate problems
        texts += [f"validate: {p.message} ({p.hint})" for p in exc.problems]
    outcome = Outcome(variant, bool(texts), "\n".join(texts))
    # the launch specpair would generate, built without the gate (which may refuse it)
    try:
        runbook = Runbook.model_validate(data)
        lock, _ = load_lock(folder)
        pair = resolve(LoadedRunbook(runbook, load_document(path), folder), lock,
                       str(folder / "lock.json"))
    except (SpecpairError, ValueError):
        return outcome  # no launch without a lock: nothing to give an engine
    for engine in releases.FOLDERS:
        if engine != pair.engine:
            continue
        try:
            launch = build_for(pair, engine)
        except (SpecpairError, AssertionError, KeyError):
            continue  # specpair cannot even write this launch (validate says why)
        argv = [a.name if isinstance(a, EnvRef) else a for a in launch.argv]
        if "--served-model-name" not in argv and engine.startswith("sglang"):
            argv += ["--served-model-name", "oracle"]  # the resolution pipeline needs one
        outcome.cases[engine] = {"argv": argv, "env": launch.env, "files": launch.files}
    return outcome


def startup(release: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """engine_startup.py's verdicts, in a long-lived process per release
    (tests/engine/workers.py)."""
    verdicts: list[dict[str, Any]] = workers.call(
        "engine_startup", release.split()[0], releases.env(release), cases, timeout=1800)
    assert len(verdicts) == len(cases)
    return verdicts
