"""`specpair impact` on temporary git repositories with real commits."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from specpair.commands.impact import impact, markdown, snapshot
from tests.support.git_repo import commit, edit, examples_repo
from tests.support.paths import REPO


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return examples_repo(tmp_path)


def edit_lock(root: Path, pair: str, fn: Callable[[dict[str, object]], None]) -> None:
    path = root / "runbooks" / pair / "lock.json"
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data, indent=2))


LING = "runbooks/ling-3-flash-dspark/runbook.yaml"
NEW = "f" * 40


def _move_target(root: Path) -> None:
    edit(root, LING, "revision: e0dfe7cd0f6e3b572bbbc0a8a84947469e428cc3",
         f"revision: {NEW}")

    def fix(data: dict[str, object]) -> None:
        data["target"]["source"] = {"repo": "inclusionAI/Ling-3.0-flash",  # type: ignore[index]
                                    "revision": NEW, "commit": NEW}
    edit_lock(root, "ling-3-flash-dspark", fix)


def _grow_draft(root: Path) -> None:
    edit(root, LING, "revision: main               # commit not retrievable",
         f"revision: {NEW}               # commit not retrievable")

    def fix(data: dict[str, object]) -> None:
        draft = data["draft"]
        draft["source"]["revision"] = NEW  # type: ignore[index]
        draft["geometry"]["num_hidden_layers"] = 6  # type: ignore[index]
        draft["geometry"]["full_attention_layers"] = 6  # type: ignore[index]
    edit_lock(root, "ling-3-flash-dspark", fix)


def test_target_change_asks_for_acceptance_and_measurement(repo: Path) -> None:
    commit(repo, _move_target)
    (item,) = impact(repo, "HEAD~1", "HEAD")[0]
    assert item.name == "ling-3-flash-dspark" and item.classes == ["target"]
    assert "re-check acceptance" in item.checklist[0]
    assert "re-run the measurement protocol" in item.checklist[0]


def test_draft_change_re_budgets_kv_with_numbers(repo: Path) -> None:
    commit(repo, _grow_draft)
    (item,) = impact(repo, "HEAD~1", "HEAD")[0]
    assert item.classes == ["draft"]
    # 8 KV heads/rank · (80 + 80) · 6 layers · 2 B at TP 4
    assert "draft cell 12,800 B/token → 15,360 B/token" in item.checklist[0]
    assert "token capacity 1,556,271 →" in item.checklist[0]
    assert "re-check co-design" in item.checklist[0]


def test_both_models_changing_asks_for_the_whole_plan(repo: Path) -> None:
    commit(repo, lambda r: (_move_target(r), _grow_draft(r)))
    (item,) = impact(repo, "HEAD~1", "HEAD")[0]
    assert {"target", "draft", "both"} <= set(item.classes)
    assert item.checklist[0].startswith("Both models changed: redo the whole two-model plan")


@pytest.mark.parametrize(("old", "new", "cls", "phrase"), [
    ("parallel: {tensor: 4}", "parallel: {tensor: 8}", "deployment", "re-budget memory"),
    ("min_length: 4.0", "min_length: 4.5", "slo", "update the SLO dashboard (min τ 4.0 → 4.5"),
    ("cold_start_budget_s: 1200", "cold_start_budget_s: 1500", "staging",
     "re-estimate cold start"),
    ("engine: {name: sglang, version: 0.5.23}", "engine: {name: sglang, version: 0.5.23}\n"
     "# same engine, comment only", None, None),
])
def test_deployment_slo_and_staging_changes(repo: Path, old: str, new: str, cls: str | None,
                                            phrase: str | None) -> None:
    commit(repo, lambda r: edit(r, LING, old, new))
    impacts, _ = impact(repo, "HEAD~1", "HEAD")
    if cls is None:
        assert impacts == []
        return
    (item,) = impacts
    assert item.classes == [cls]
    assert phrase is not None and phrase in " ".join(item.checklist)


def test_engine_change_asks_to_revalidate_flags(repo: Path) -> None:
    commit(repo, lambda r: edit(r, "runbooks/qwen3-8b-dflash/runbook.jsonnet",
                                "speculation: { method: 'DFLASH', block_size: 16 },",
                                "speculation: { method: 'DFLASH', block_size: 16 },\n"
                                "  engine: { name: 'vllm', version: '0.33.0' },"))
    (item,) = impact(repo, "HEAD~1", "HEAD")[0]
    assert item.classes == ["engine"]
    assert "sglang 0.5.23 → vllm 0.33.0" in item.checklist[0]


def test_shared_jsonnet_library_reaches_every_importer(repo: Path) -> None:
    commit(repo, lambda r: edit(r, "runbooks/lib/sglang-dense.libsonnet",
                                "gpu: 'H100-80GB'", "gpu: 'H200-141GB'"))
    impacts, _ = impact(repo, "HEAD~1", "HEAD")
    assert {i.name for i in impacts} == {"qwen3-8b-dflash", "llama31-8b-eagle3"}
    assert all(i.classes == ["deployment"] for i in impacts)


def test_whitespace_and_comments_only_is_no_impact(repo: Path) -> None:
    def reformat(root: Path) -> None:
        edit(root, LING, "pair:\n", "# a new comment\npair:\n")
        edit(root, LING, "  owner: serving-platform", "  owner:    serving-platform   ")
        edit(root, "runbooks/qwen3-8b-dflash/runbook.jsonnet", "base {", "base  {  // c")
        lock = root / "runbooks" / "deepseek-v3-mtp" / "lock.json"
        lock.write_text(json.dumps(json.loads(lock.read_text())))  # same JSON, re-indented
    commit(repo, reformat)
    impacts, problems = impact(repo, "HEAD~1", "HEAD")
    assert impacts == [] and problems == []
    assert "No impact" in markdown(impacts, problems, "HEAD~1", "HEAD")


def test_rename_add_and_remove(repo: Path) -> None:
    def rename(root: Path) -> None:
        old = root / "runbooks" / "deepseek-v3-mtp"
        new = root / "runbooks" / "dsv3-mtp"
        old.rename(new)
        edit(root, "runbooks/dsv3-mtp/runbook.yaml", "name: deepseek-v3-mtp", "name: dsv3-mtp")
        edit_lock(root, "dsv3-mtp", lambda d: d.update(pair="dsv3-mtp"))
        shutil.rmtree(root / "runbooks" / "llama33-70b-eagle3-vllm")
    commit(repo, rename)
    impacts = {i.name: i for i in impact(repo, "HEAD~1", "HEAD")[0]}
    assert impacts["dsv3-mtp"].renamed_from == "deepseek-v3-mtp"
    assert impacts["dsv3-mtp"].classes == ["renamed"]
    assert impacts["llama33-70b-eagle3-vllm"].classes == ["removed"]
    commit(repo, lambda r: shutil.copytree(REPO / "runbooks" / "llama33-70b-eagle3-vllm",
                                           r / "runbooks" / "llama33-70b-eagle3-vllm",
                                           ignore=shutil.ignore_patterns("generated")))
    assert impact(repo, "HEAD~1", "HEAD")[0][0].classes == ["added"]


def test_cli_markdown_json_and_fail_on(repo: Path) -> None:
    commit(repo, _grow_draft)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "specpair", "impact", "--base", "HEAD~1",
                               "--head", "HEAD", *args], cwd=repo, capture_output=True,
                              text=True, check=False)
    text = cli()
    assert text.returncode == 0
    # a new draft changes τ first of all, and has to be staged: not only a KV re-budget
    (item,) = [line for line in text.stdout.splitlines() if "Draft changed" in line]
    assert "re-measure acceptance" in item and "`specpair bench`" in item
    assert "re-stage the new draft" in item and "re-budget KV" in item
    data = json.loads(cli("--format", "json").stdout)
    assert data["pairs"][0]["classes"] == ["draft"]
    assert cli("--fail-on", "draft").returncode == 3
    assert cli("--fail-on", "target,engine").returncode == 0
    assert cli("--fail-on", "any").returncode == 3
    bad = cli("--base", "no-such-rev")
    assert bad.returncode == 1 and "git rev-parse" in bad.stderr


def test_a_stale_lock_is_reported_as_stale_not_as_a_removed_pair(repo: Path) -> None:
    """The draft's revision moves in the runbook but the lock is not refreshed."""
    commit(repo, lambda root: edit(root, LING, "revision: main               # commit not "
                                   "retrievable", f"revision: {NEW}               # commit "
                                   "not retrievable"))
    result = subprocess.run([sys.executable, "-m", "specpair", "impact", "--base", "HEAD~1",
                             "--head", "HEAD", "--format", "json"], cwd=repo,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 3, result.stdout + result.stderr
    (pair,) = json.loads(result.stdout)["pairs"]
    assert pair["name"] == "ling-3-flash-dspark"
    assert pair["classes"] == ["draft", "invalid", "stale-lock"]
    assert pair["checklist"] == [
        f"Lock is stale (draft revision: runbook '{NEW}', lock 'main'): run "
        "`specpair lock --refresh runbooks/ling-3-flash-dspark` where the hub is reachable, "
        "or re-declare it offline (`specpair lock --declare runbooks/ling-3-flash-dspark "
        "--target-config PATH/config.json --target-bytes N [--draft-config PATH/config.json "
        # a repository without specpair's noxfile: the command that exists there
        "--draft-bytes N]`); commit the new lock.json and rebuild (`specpair build`); until "
        "then this checklist covers the runbook only, not budgets or artifacts"]
    assert pair["changes"] == [f'draft.revision: "main" → "{NEW}"']
    text = subprocess.run([sys.executable, "-m", "specpair", "impact", "--base", "HEAD~1",
                           "--head", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=False)
    assert text.returncode == 3
    assert "Pair removed" not in text.stdout
    assert "- [ ] Lock is stale (draft revision" in text.stdout
    assert "**Invalid runbooks at head**" in text.stdout
    # opting out of the default still reports it, with exit 0
    quiet = subprocess.run([sys.executable, "-m", "specpair", "impact", "--base", "HEAD~1",
                            "--head", "HEAD", "--fail-on", ""], cwd=repo,
                           capture_output=True, text=True, check=False)
    assert quiet.returncode == 0 and "Lock is stale" in quiet.stdout


def test_threshold_changes_ask_to_apply_the_regenerated_alerts(repo: Path) -> None:
    commit(repo, lambda r: edit(r, LING, "min_length: 4.0", "min_length: 4.5"))
    (item,) = impact(repo, "HEAD~1", "HEAD")[0]
    (line,) = [c for c in item.checklist if c.startswith("Alert thresholds changed")]
    assert "SLO min τ 4.0 → 4.5" in line and "prometheus-rules.yaml" in line


def test_a_snapshot_extracts_files_member_by_member(repo: Path, tmp_path: Path) -> None:
    """The snapshot is read from the tree object, entry by entry: every tracked file
    arrives with its bytes, a symlink does not."""
    (repo / "runbooks" / "outside").symlink_to("/etc")
    commit(repo, lambda root: None)
    snap, left_out = snapshot(repo, "HEAD", tmp_path / "snap")
    assert any("runbooks/outside" in line for line in left_out)
    extracted = sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
    tracked = subprocess.run(["git", "ls-files", "runbooks"], cwd=repo, text=True,
                             capture_output=True, check=True).stdout.split()
    assert "runbooks/outside" in tracked and len(extracted) > 10
    assert extracted == sorted(t for t in tracked if t != "runbooks/outside")
    assert not (snap / "runbooks" / "outside").exists()
    for rel in extracted:
        assert (snap / rel).read_bytes() == (repo / rel).read_bytes()


def test_the_pull_requests_gitattributes_hide_no_pair(repo: Path) -> None:
    """`git archive` applied the revision's own .gitattributes: a pull request marking its
    new pair and a changed pair `export-ignore` got "No impact" and a removed pair."""
    added = "llama33-70b-eagle3-vllm"
    commit(repo, lambda root: shutil.rmtree(root / "runbooks" / added))

    def hide(root: Path) -> None:
        shutil.copytree(REPO / "runbooks" / added, root / "runbooks" / added,
                        ignore=shutil.ignore_patterns("generated"))
        _grow_draft(root)
        (root / ".gitattributes").write_text(f"runbooks/{added}/** export-ignore\n"
                                             "*.yaml export-subst\n")
        (root / "runbooks" / "ling-3-flash-dspark" / ".gitattributes").write_text(
            "* export-ignore\n")
    commit(repo, hide)
    impacts, problems = impact(repo, "HEAD~1", "HEAD")
    classes = {item.name: item.classes for item in impacts}
    assert classes == {added: ["added"], "ling-3-flash-dspark": ["draft"]}, classes
    assert problems == []


def _argv_value(argv: list[object], flag: str) -> str:
    words = [str(a) for a in argv]
    return words[words.index(flag) + 1]


def test_an_engine_release_change_lists_what_the_new_release_changes(
        repo: Path, tmp_path: Path) -> None:
    from specpair.analyse.launch import build_for
    from specpair.commands.impact import load_side

    commit(repo, lambda r: edit(r, "runbooks/qwen3-8b-dflash/runbook.jsonnet",
                                "speculation: { method: 'DFLASH', block_size: 16 },",
                                "speculation: { method: 'DFLASH', block_size: 16 },\n"
                                "  engine: { name: 'vllm', version: '0.33.0' },"))
    (item,) = impact(repo, "HEAD~1", "HEAD")[0]
    sides = [load_side(snapshot(repo, rev, tmp_path)[0]).pairs["qwen3-8b-dflash"]
             for rev in ("HEAD~1", "HEAD")]
    before, after = (build_for(p).argv for p in sides)
    text = "\n".join(item.checklist)
    # each release's own launch command spells the argument and its value
    fraction = (f"memory fraction: flag renamed --mem-fraction-static → "
                f"--gpu-memory-utilization, default "
                f"{_argv_value(before, '--mem-fraction-static')} → "
                f"{_argv_value(after, '--gpu-memory-utilization')}")
    assert fraction in text
    assert (f"KV page size (tokens): flag renamed --page-size → --block-size, default "
            f"{_argv_value(before, '--page-size')} → {_argv_value(after, '--block-size')}"
            in text.replace("KV block size", "KV page size"))
    # the runbook sets the limit: the flag is renamed, its value carried over
    assert _argv_value(before, "--max-running-requests") == \
        _argv_value(after, "--max-num-seqs")
    assert "running requests: flag renamed --max-running-requests → --max-num-seqs\n" in \
        text + "\n"
    assert "gate rules that now apply: " in text and "SP502" in text
    assert "budget: KV token capacity" in text
    assert any(i.startswith("Re-measure acceptance") for i in item.checklist)


def test_a_release_specpair_does_not_support_is_an_error_naming_the_supported(
        repo: Path) -> None:
    commit(repo, lambda r: edit(r, "runbooks/qwen3-8b-dflash/runbook.jsonnet",
                                "speculation: { method: 'DFLASH', block_size: 16 },",
                                "speculation: { method: 'DFLASH', block_size: 16 },\n"
                                "  engine: { name: 'sglang', version: '0.4.0' },"))
    _, problems = impact(repo, "HEAD~1", "HEAD")
    text = "\n".join(problems)
    assert "sglang 0.4.0 is not supported" in text
    assert "sglang 0.5.23" in text and "vllm 0.33.0" in text


def _flag_values(argv: list[object]) -> dict[str, str]:
    """--flag → value (or "" for a switch) of a launch command, in its own spelling."""
    words = [str(a) for a in argv]
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            found[word] = "" if nxt.startswith("--") else nxt
    return found


def test_a_version_change_within_one_engine_names_each_changed_argument_and_the_budget(
        repo: Path, tmp_path: Path) -> None:
    """vLLM 0.33.0 → 0.32.0 on the 70B EAGLE-3 example: the checklist names exactly the
    arguments whose values the two releases' own commands differ in (for these releases
    none: their defaults are the same, engines/vllm_0_32_0/facts.py), gives both releases'
    budgets and asks to re-measure acceptance."""
    from specpair.analyse.budget import compute
    from specpair.analyse.launch import build_for
    from specpair.commands.impact import load_side

    example = "runbooks/llama33-70b-eagle3-vllm/runbook.yaml"
    commit(repo, lambda r: edit(r, example, "engine: {name: vllm, version: 0.33.0}",
                                "engine: {name: vllm, version: 0.32.0}"))
    items, problems = impact(repo, "HEAD~1", "HEAD")
    assert problems == []
    (item,) = [i for i in items if i.name == "llama33-70b-eagle3-vllm"]
    sides = [load_side(snapshot(repo, rev, tmp_path)[0]).pairs["llama33-70b-eagle3-vllm"]
             for rev in ("HEAD~1", "HEAD")]
    assert [p.engine for p in sides] == ["vllm 0.33.0", "vllm 0.32.0"]
    before, after = (_flag_values(build_for(p).argv) for p in sides)
    upgrade = [line for line in item.checklist
               if line.startswith("Engine release vLLM 0.33.0 → vLLM 0.32.0: ")]
    assert upgrade, item.checklist
    argument_items = [line for line in upgrade if " → " in line.split(": ", 1)[1]
                      and not line.split(": ", 1)[1].startswith(("budget", "reviewed "))]
    differing = sorted(flag for flag in before.keys() | after.keys()
                       if before.get(flag) != after.get(flag))
    assert differing == [] and argument_items == []  # every resolved default is the same
    capacity = [compute(p).speculative for p in sides]
    assert all(c is not None for c in capacity)
    line = next(u for u in upgrade if ": budget: " in u)
    assert (f"KV token capacity {capacity[0].max_total_tokens:,} → "  # type: ignore[union-attr]
            f"{capacity[1].max_total_tokens:,}") in line  # type: ignore[union-attr]
    assert any(i.startswith("Re-measure acceptance") for i in item.checklist)


def test_a_sglang_version_change_names_each_changed_default_with_its_budget_effect(
        repo: Path, tmp_path: Path) -> None:
    """SGLang 0.5.18 → 0.5.23 on the gpt-oss-120b example (a hybrid sliding-window target):
    the checklist names --swa-full-tokens-ratio, whose default 0.5.18 sets in its parser and
    0.5.23 resolves later (the packages' reviewed defaults, which
    tests/engine/test_upgrade_defaults.py checks against both releases' own parser and
    resolution), with the budget each release computes; no state-pool ratio, which a target
    without linear attention has no use for; and asks to re-measure acceptance."""
    from specpair.analyse.budget import compute
    from specpair.commands.impact import load_side
    from specpair.engines.sglang_0_5_18.args import DEFAULTS as OLD
    from specpair.engines.sglang_0_5_23.args import DEFAULTS as NEW

    example = "runbooks/gpt-oss-120b-ngram-sglang-0-5-18/runbook.yaml"
    commit(repo, lambda r: edit(r, example, "engine: {name: sglang, version: 0.5.18}",
                                "engine: {name: sglang, version: 0.5.23}"))
    items, problems = impact(repo, "HEAD~1", "HEAD")
    assert problems == []
    (item,) = [i for i in items if i.name == "gpt-oss-120b-ngram-sglang-0-5-18"]
    sides = [load_side(snapshot(repo, rev, tmp_path / rev.replace("~", "-"))[0])
             .pairs["gpt-oss-120b-ngram-sglang-0-5-18"] for rev in ("HEAD~1", "HEAD")]
    assert [p.engine for p in sides] == ["sglang 0.5.18", "sglang 0.5.23"]
    prefix = "Engine release SGLang 0.5.18 → SGLang 0.5.23: "
    upgrade = [line.removeprefix(prefix) for line in item.checklist
               if line.startswith(prefix)]
    capacity = [compute(p).speculative.max_total_tokens for p in sides]  # type: ignore[union-attr]
    (swa,) = [u for u in upgrade if u.startswith("--swa-full-tokens-ratio ")]
    old, new = OLD.swa_full_tokens_ratio, NEW.swa_full_tokens_ratio
    assert old.parser is not None and new.parser is None and old.resolved == new.resolved
    assert f"default {new.resolved:g} in both" in swa
    assert f"parser default {old.parser:g} ({old.source})" in swa
    assert f"no parser default, resolved to {new.resolved:g} ({new.source})" in swa
    assert (f"effect on the budget: none, both budgets run with {new.resolved:g} "
            f"(KV token capacity {capacity[0]:,} → {capacity[1]:,})") in swa
    assert not any("--mamba-full-memory-ratio" in u for u in upgrade)
    assert any(u.startswith(f"budget: KV token capacity {capacity[0]:,} → {capacity[1]:,}")
               for u in upgrade)
    assert any(i.startswith("Re-measure acceptance") for i in item.checklist)


def test_a_deployment_the_latency_model_refuses_keeps_its_checklist(repo: Path) -> None:
    """The head spreads TP 4 over two 2-GPU nodes: the step model refuses it by name
    (cross-node model parallelism) but the memory budget stands, so the pair is not broken
    and the deployment change still asks to re-budget, with the refusal where τ* was."""
    commit(repo, lambda r: edit(r, LING, "gpus_per_node: 8\n  parallel: {tensor: 4}",
                                "gpus_per_node: 2\n  nodes: 2\n  parallel: {tensor: 4}"))
    (item,) = impact(repo, "HEAD~1", "HEAD")[0]
    text = " ".join(item.checklist)
    assert not text.startswith("Fix the pair"), item.checklist
    assert "re-budget memory" in text
    assert "not modelled: cross-node model parallelism" in text


def test_checklists_say_fits_in_words_not_booleans() -> None:
    """Issue 51: a deployment change printed "fits: True" in the checklist."""
    from specpair.commands.impact_checklist import checklist
    from tests.support.examples import example
    from tests.support.pairs import with_runbook

    base = example("llama33-70b-eagle3-vllm")
    for fraction, words in ((0.85, "fits (unchanged)"), (0.3, "fits → does not fit")):
        head = with_runbook(base, deployment={"memory_fraction": fraction})
        items = checklist({"deployment"}, base, head)
        text = "\n".join(items)
        assert words in text, text
        assert "True" not in text and "False" not in text
