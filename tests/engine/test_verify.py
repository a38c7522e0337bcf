"""`specpair verify` on corpus pairs whose layout the allowlist refuses: the figures it
prints are the release's own (the KV oracle's values for the same pair), reached the way a
user reaches them: a runbook over the checkpoint's config folder, `specpair lock
--declare`, then `specpair verify --record` running the release's code in a process of
its own; the build then marks each budget as the engine answered.

The oracle's side is built independently of verify: the corpus pair made by the oracle's
own helper (`make_pair`), its command or case built as the KV oracle builds them, and the
release's script asked in the oracle's long-lived harness process."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specpair import cli
from specpair.analyse.analysis import Analysis
from specpair.analyse.budget import compute
from specpair.commands.build import load_pairs
from specpair.engines import engine_run, verified_layouts
from specpair.model.config_geometry import NotModelled
from specpair.model.errors import SpecpairError
from tests.engine import releases
from tests.engine.corpus import CorpusPair, corpus_targets, geometry, make_pair
from tests.engine.kv_cases import KV_BUDGET, run_engine, sglang_cases, vllm_cases

MIN_PAIRS = 10  # the bar: at least ten pairs off the allowlist, per release
# every other vLLM pair runs under a schedule pinned by hand, which must survive verify,
# the lock and the build (vLLM sizes its cache for num_speculative_tokens whatever the
# schedule; SGLang sizes for the schedule's largest K, and schedules only EAGLE drafts:
# test_verify_asks_the_scheduled_question_of_sglang)
SCHEDULE = {"schedule": [{"start": 1, "end": 8, "k": 2}, {"start": 9, "end": 64, "k": 1}]}
SCHEDULE_DEPLOYMENT = {"max_running_requests": 64}


def refused_targets(release: str) -> list[CorpusPair]:
    """Corpus targets that lock (their layout keys are modelled) but whose layout is not
    on `release`'s allowlist, in corpus order."""
    allowed = verified_layouts.verified()[release]
    found = []
    for corpus in corpus_targets():
        try:
            g = geometry(corpus.target, corpus.root)
        except (NotModelled, ValueError, KeyError):
            continue  # refused at lock by its layout key: nothing to verify
        if verified_layouts.layout_architecture(g) not in allowed:
            found.append(corpus)
    return found


def write_runbook(root: Path, pair: Any, corpus: CorpusPair) -> None:
    """The oracle's pair as a user's runbook folder, locked with `specpair lock --declare`."""
    folder = root / "runbooks" / pair.name
    folder.mkdir(parents=True)
    data = pair.runbook.model_dump(mode="json", exclude_none=True)
    (folder / "runbook.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    draft = [] if corpus.draft is None else [
        "--draft-config", str(corpus.path(corpus.draft) / "config.json"),
        "--draft-bytes", str(1 << 28)]
    status = cli.main(["lock", "--declare", str(folder / "runbook.yaml"), "--target-config",
                       str(corpus.path(corpus.target) / "config.json"),
                       "--target-bytes", str(1 << 30), *draft])
    assert status == 0, pair.name


def oracle_case(release: str, corpus: CorpusPair, asked: dict[str, Any]) -> dict[str, Any]:
    """The case the KV oracle's own builders (kv_cases.py) make for the corpus pair at TP 1
    with auto KV and the hybrid manager on, as verify's runbook has it. SGLang's oracle
    sizes a fixed rest; here the rest verify's budget found, so both ask the same."""
    if release.startswith("sglang"):
        (_, _, case), *_ = sglang_cases([corpus], (1,), ("auto",), release)
        return {**case, "rest_gib": asked["rest_gib"]}
    (_, _, case), *_ = vllm_cases([corpus], (1,), ("auto",), release)[0]
    return dict(case)


@pytest.mark.parametrize("release", ["sglang 0.5.23", "vllm 0.33.0"])
def test_verify_prints_the_engines_numbers_off_the_allowlist(
        release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    engine, version = release.split()
    deployment = {"kv_cache_memory_bytes": KV_BUDGET} if engine == "vllm" else {}
    pairs, corpora = {}, {}
    for corpus in refused_targets(release):
        if engine not in corpus.engines:
            continue
        extra = {}
        if engine == "vllm" and len(pairs) % 2:
            corpus = dataclasses.replace(corpus, speculation={**corpus.speculation,
                                                              **SCHEDULE})
            extra = SCHEDULE_DEPLOYMENT
        pair = make_pair(corpus, engine, version, 1, "auto", deployment | extra)
        if pair is not None:
            write_runbook(tmp_path, pair, corpus)
            pairs[pair.name], corpora[pair.name] = pair, corpus
    assert len(pairs) >= MIN_PAIRS, sorted(pairs)
    # as a user's second run: nothing named, the release's environment from specpair's
    # cache, offline (the engines session registered its venv and folders as that cache)
    oracle_env = releases.env(release)
    monkeypatch.delenv("SPECPAIR_ENGINE_PYTHON", raising=False)
    monkeypatch.delenv(engine_run.variable(release), raising=False)
    capsys.readouterr()
    status = cli.main(["verify", "--root", str(tmp_path), "--offline", "--record", "--json",
                       str(tmp_path / "runbooks")])
    captured = capsys.readouterr()
    assert "creating" not in captured.err and "unpacking" not in captured.err
    results = json.loads(captured.out)
    assert all(r["environment"].startswith("cached ") for r in results), results[0]
    assert sorted(r["pair"] for r in results) == sorted(pairs)
    assert status == (0 if all(r["confirmed"] for r in results) else 1)

    oracle = run_engine("sglang_pools.py" if engine == "sglang" else "vllm_kv_plan.py",
                        [oracle_case(release, corpora[r["pair"]], r["asked"]) for r in results],
                        oracle_env)
    built = {p.name: p for p in load_pairs(tmp_path, [tmp_path / "runbooks"])}
    report = {}
    for result, theirs in zip(results, oracle, strict=True):
        name = result["pair"]
        assert result["refused_by_specpair"], name  # the allowlist refuses each one
        if not theirs["ok"]:  # the engine refuses the pair: verify says so, in its words
            assert result["engine_error"] and not result["confirmed"], name
            assert built[name].engine_verdict is None  # nothing answered, nothing recorded
            report[name] = "refused by the engine"
            continue
        assert result["engine_error"] is None, (name, result["engine_error"])
        engine_figures = {f["key"]: f["engine"] for f in result["figures"]}
        assert engine_figures == {k: theirs[k] for k in engine_figures}, name
        # recorded: a confirmed layout is now budgeted and says so; one where specpair's
        # port differs stays refused (its figures are known wrong)
        scheduled = "schedule" in corpora[name].speculation
        if result["confirmed"]:
            # as the build budgets it, under its schedule too: the answer recorded is the
            # scheduled pair's, the question the build asks
            analysis = Analysis(built[name])
            assert (analysis.pair.schedule is not None) == scheduled, name
            assert analysis.budget.confirmed_by == f"engine {release}", name
            report[name] = "confirmed" + (" under its schedule" if scheduled else "")
        else:
            # a figure the port gets wrong is a layout the release's own lists say it
            # sizes otherwise: refused whatever the runbook declares, never budgeted
            assert "cannot be budgeted" in (result["refused_by_specpair"] or ""), name
            with pytest.raises(SpecpairError):
                compute(built[name])
            report[name] = "differs: " + ", ".join(
                f["key"] for f in result["figures"] if f["ours"] != f["engine"])
    print(json.dumps(report, indent=1))
    assert sum(v != "refused by the engine" for v in report.values()) >= MIN_PAIRS, report
    if engine == "vllm":
        assert sum(v == "confirmed under its schedule" for v in report.values()) >= 3, report


def test_verify_asks_the_scheduled_question_of_sglang(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Targets off the allowlist with an EAGLE-3 draft of their hidden size and vocabulary,
    under a schedule whose largest K (2) is below num_speculative_tokens (3): SGLang's
    adaptive mode sizes its pools for the largest candidate, so the scheduled pair asks a
    question of its own. `verify --record` must ask that one and the build then budget the
    pair confirmed; asked the unscheduled question (as before 40d58fe), the answer recorded
    matched nothing the build asks and the pair stayed refused."""
    from tests.engine.corpus import CORPUS, EAGLE3

    schedule = {**EAGLE3, **SCHEDULE}
    corpora = {c.name: c for c in (
        CorpusPair("skywork-reward-eagle3-scheduled", "Skywork__Skywork-Reward-Llama-3.1-8B-v0.2",
                   "sgl-project__SpecForge-llama3-8B-eagle3", schedule, root=CORPUS),
        CorpusPair("mllama-11b-eagle3-scheduled", "sgl-project__ome-testdata-llama3_2_11b_vision",
                   "sgl-project__SpecForge-llama3-8B-eagle3", schedule, root=CORPUS))}
    made = {}
    for corpus in corpora.values():
        pair = make_pair(corpus, "sglang", "0.5.23", 1, "auto", SCHEDULE_DEPLOYMENT)
        assert pair is not None, corpus.name
        write_runbook(tmp_path, pair, corpus)
        made[corpus.name] = pair
    monkeypatch.delenv("SPECPAIR_ENGINE_PYTHON", raising=False)
    monkeypatch.delenv(engine_run.variable("sglang 0.5.23"), raising=False)
    capsys.readouterr()
    status = cli.main(["verify", "--root", str(tmp_path), "--offline", "--record", "--json",
                       str(tmp_path / "runbooks")])
    results = json.loads(capsys.readouterr().out)
    assert status == 0 and sorted(r["pair"] for r in results) == sorted(corpora), \
        json.dumps(results, indent=1)[:6000]
    oracle = run_engine("sglang_pools.py", [
        scheduled_case(made[r["pair"]], r["asked"], tmp_path / "tiers") for r in results],
        releases.env("sglang 0.5.23"))
    built = {p.name: p for p in load_pairs(tmp_path, [tmp_path / "runbooks"])}
    for result, theirs in zip(results, oracle, strict=True):
        name = result["pair"]
        assert result["refused_by_specpair"] and result["confirmed"], result
        argv = result["asked"]["argv"]  # the scheduled command: adaptive, sized for K = 2
        assert "--speculative-adaptive" in argv, argv
        assert argv[argv.index("--speculative-num-steps") + 1] == "2", argv
        assert theirs["ok"], theirs
        assert {f["key"]: f["engine"] for f in result["figures"]} == {
            f["key"]: theirs[f["key"]] for f in result["figures"]}, name
        analysis = Analysis(built[name])
        assert analysis.pair.schedule is not None and analysis.pair.schedule.max_k == 2, name
        assert analysis.budget.confirmed_by == "engine sglang 0.5.23", name


def scheduled_case(pair: Any, asked: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The KV oracle's case for `pair` under its schedule, built apart from verify: the
    release's launch of the scheduled pair (its adaptive tier file written into `folder`,
    where the command then reads it) with the rest verify's budget found."""
    from specpair.analyse.schedule import resolve_by_release
    from specpair.engines.registry import by_label
    from tests.engine.kv_cases import argv_for_engine

    scheduled, _ = resolve_by_release(pair)
    assert scheduled.schedule is not None
    launch = by_label("sglang 0.5.23").launch(scheduled, True)
    argv = argv_for_engine(launch.argv)
    folder.mkdir(exist_ok=True)
    for path, text in launch.files.items():
        local = folder / f"{pair.name}-{Path(path).name}"
        local.write_text(text, encoding="utf-8")
        argv = [str(local) if arg == path else arg for arg in argv]
    return {"argv": argv, "rest_gib": asked["rest_gib"], "resolve_speculative": True}
