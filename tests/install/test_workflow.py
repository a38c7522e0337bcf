"""The workflow `specpair init` writes, run step by step as GitHub's runner runs it, on a
pull request that plants every way issue 52 found to run its own code before the gate or
to change what the gate reports: a `tomllib.py` and a `pip/` package at the checkout's
root (the install step's imports), a `specpair/` and a `mkdocs/` package there too, a
hook in `site/mkdocs.yml`, a committed old SARIF and a link where the checklist was
written, runbook text that would break out of the checklist's code spans, and (issue 51)
a `source` in specpair.toml naming a repository of its own, whose setup.py would run if
installed; and on a clean pull request in a repository without code scanning, which
must pass with its findings in the job summary.

Real: git (the team's repository, the pull request's branch, the checkout), bash running
each `run:` script with the runner's flags, Python, venv, pip (installing the
workflow's own requirement, `specpair[site] @ git+<source>@v<version>`, with git's
config rewriting the README's URL to the clone `nox -s install` serves: the one
substitution; dependencies from this machine's configured index), specpair and mkdocs.
Stand-ins, since nothing here can reach GitHub: the three `uses:` actions (checkout is a
`git clone`, setup-python the Python on PATH, upload-sarif records the file it is given,
or refuses it as GitHub does where code scanning is off) and `gh` (records the comment
it would post).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.install.support import Run, Served

WORKFLOW = ".github/workflows/specpair.yml"
EXAMPLE = "runbooks/deepseek-v3-mtp/runbook.yaml"
HOSTILE_TITLE = "x` [click](https://evil.example) @octocat <img src=x onerror=alert(1)> `y"
# the repository a hostile pull request names as specpair's source (rewritten by git to a
# local one whose setup.py leaves a marker: no network either way)
EVIL_SOURCE = "https://evil.example/specpair"
# what GitHub answers an upload where code scanning is off (a private repository without
# GitHub Advanced Security)
NO_CODE_SCANNING = "Advanced Security must be enabled for this repository to use code scanning."


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t",
                           "-c", "commit.gpgsign=false", *args], cwd=root,
                          capture_output=True, text=True, check=True).stdout


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _marker_code(marker: Path) -> str:
    """Python that proves it ran: it writes `marker`."""
    return f"open({str(marker)!r}, 'w').write('ran')\n"


def evil_source(tmp: Path, markers: Path, tag: str) -> Path:
    """A repository with the release's tag whose setup.py leaves a marker when pip builds
    it: what a pull request could name as specpair's source."""
    repo = tmp / "evil-source"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "setup.py").write_text(_marker_code(markers / "evil-source-setup.py")
                                   + "from setuptools import setup\n"
                                     "setup(name='specpair', version='0')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "not specpair")
    git(repo, "tag", tag)
    return repo


def plant(repo: Path, markers: Path, victim: Path) -> None:
    """The pull request's own files: each would run, or be written through, or be
    uploaded, under the workflow as it was."""
    config = repo / "specpair.toml"
    text = config.read_text()
    assert text.count('\nsource = "') == 1, text
    config.write_text(re.sub(r'\nsource = "[^"]*"', f'\nsource = "{EVIL_SOURCE}"', text))
    (repo / "tomllib.py").write_text(_marker_code(markers / "tomllib.py"))
    for package in ("pip", "specpair", "mkdocs"):
        (repo / package).mkdir()
        for module in ("__init__.py", "__main__.py"):
            (repo / package / module).write_text(_marker_code(markers / f"{package}.{module}"))
    (repo / "sitecustomize.py").write_text(_marker_code(markers / "sitecustomize.py"))
    (repo / "site" / "hooks.py").write_text(_marker_code(markers / "mkdocs-hook"))
    config = repo / "site" / "mkdocs.yml"
    config.write_text(config.read_text() + "hooks:\n  - hooks.py\n")
    # an old SARIF with a finding of its own, where the workflow wrote its SARIF
    (repo / "specpair.sarif").write_text(json.dumps({
        "version": "2.1.0", "runs": [{"tool": {"driver": {"name": "specpair"}},
                                      "results": [{"ruleId": "PLANTED",
                                                   "message": {"text": "planted"}}]}]}))
    # the checklist's old fixed name, a link to a file outside the repository
    (repo / "impact.md").symlink_to(victim)
    runbook = repo / EXAMPLE
    text = runbook.read_text()
    # markup in runbook text; and the SP101 waiver gone, so `check` fails
    text = text.replace("title: DeepSeek-V3 with its built-in MTP layer",
                        f"title: {json.dumps(HOSTILE_TITLE)}")
    cut = text.index("  - rule: SP101")
    text = text[:cut] + text[text.index("  - rule: SP104"):]
    runbook.write_text(text)


# The expressions the workflow uses, each evaluated as GitHub would for this run (a
# pull request from a branch of the same repository). One the workflow gains fails here
# until it is added, so the test never guesses.
Context = dict[str, Any]
EXPRESSIONS: dict[str, Callable[[Context], Any]] = {
    "github.ref": lambda c: "refs/pull/7/merge",
    "runner.temp": lambda c: c["runner_temp"],
    "github.base_ref": lambda c: "main",
    "github.token": lambda c: "job-token",
    "github.event.pull_request.number": lambda c: "7",
    "steps.sarif.outputs.file": lambda c: c["outputs"].get("sarif", {}).get("file", ""),
    "steps.impact.outputs.file": lambda c: c["outputs"].get("impact", {}).get("file", ""),
    "!cancelled() && steps.install.outcome == 'success'":
        lambda c: c["outcome"].get("install") == "success",
    "!cancelled() && steps.sarif.outputs.file != ''":
        lambda c: c["outputs"].get("sarif", {}).get("file", "") != "",
    "!cancelled() && steps.install.outcome == 'success' && github.event_name == "
    "'pull_request'": lambda c: c["outcome"].get("install") == "success",
    "!cancelled() && steps.impact.outputs.file != '' && "
    "github.event.pull_request.head.repo.full_name == github.repository":
        lambda c: c["outputs"].get("impact", {}).get("file", "") != "",
    # the workflow before issue 52 used these (the test runs it too, and must fail there)
    "always()": lambda c: True,
    "always() && github.event_name == 'pull_request'": lambda c: True,
    "always() && github.event_name == 'pull_request' && "
    "github.event.pull_request.head.repo.full_name == github.repository": lambda c: True,
    "github.event_name == 'pull_request' && format('origin/{0}', github.base_ref) || "
    "'HEAD~1'": lambda c: "origin/main",
    "!cancelled() && steps.pages.outcome == 'success'":
        lambda c: c["outcome"].get("pages") == "success",
}


def evaluate(expression: str, context: Context) -> Any:
    expression = expression.strip()
    assert expression in EXPRESSIONS, f"an expression this test does not know: {expression}"
    return EXPRESSIONS[expression](context)


def substitute(value: str, context: Context) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(evaluate(m.group(1), context)), value)


def condition(step: dict[str, Any], context: Context) -> bool:
    raw = step.get("if")
    if raw is None:  # GitHub's default: success(), no earlier step concluded in failure
        return not context["failed"]
    match = re.fullmatch(r"\s*\$\{\{(.*)\}\}\s*", raw)
    return bool(evaluate(match.group(1) if match else raw, context))


def _key_values(path: Path) -> dict[str, str]:
    pairs = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        key, _, value = line.partition("=")
        pairs[key] = value
    return pairs


def _action(uses: str, inputs: dict[str, str], workspace: Path, record: Path,
            code_scanning: bool) -> tuple[int, str]:
    """The stand-in for one `uses:` action (setup-python's Python is already on PATH)."""
    if uses.startswith("github/codeql-action/upload-sarif@"):
        if not code_scanning:
            return 1, f"Error: {NO_CODE_SCANNING}\n"
        uploaded = workspace / inputs["sarif_file"]  # a relative path is the workspace's
        shutil.copy(uploaded, record / "uploaded.sarif")
        (record / "uploaded-from").write_text(str(uploaded))
    return 0, ""


def run_job(workflow: dict[str, Any], origin: Path, head: str, tmp: Path,
            runner_env: dict[str, str], code_scanning: bool = True) -> dict[str, Any]:
    """The gate job's steps in order: `if:` evaluated, `${{ }}` substituted, each `run:`
    script under `bash --noprofile --norc -eo pipefail` in its working directory with the
    runner's variables, GITHUB_ENV and GITHUB_OUTPUT carried as the runner carries them;
    a step with `continue-on-error` that fails has the outcome failure and the
    conclusion success, and later steps run as if it had passed."""
    workspace, runner_temp, home, tools = (tmp / "work" / "repo", tmp / "runner-temp",
                                           tmp / "home", tmp / "tools")
    for folder in (runner_temp, home, tools):
        folder.mkdir(parents=True)
    record = tmp / "recorded"
    record.mkdir()
    # setup-python: a Python of its own on PATH (a venv of this interpreter, so that
    # nothing a step installs with it reaches this machine's installation)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "toolcache")],
                   check=True)
    (tools / "python").symlink_to(tmp / "toolcache" / "bin" / "python")
    # gh: GitHub's API cannot be reached; this stand-in records the comment it is asked for
    gh = tools / "gh"
    gh.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> {record}/gh-args\n"
                  f"while [ $# -gt 0 ]; do [ \"$1\" = --body-file ] && cat \"$2\" > "
                  f"{record}/comment.md; shift; done\n")
    gh.chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(runner_temp),
           "GITHUB_EVENT_NAME": "pull_request", "GITHUB_REPOSITORY": "team/runbooks",
           "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"), "CI": "true",
           "HF_HUB_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1", **runner_env}
    context: Context = {"runner_temp": str(runner_temp), "outcome": {}, "outputs": {},
                        "failed": False, "steps": []}
    for number, step in enumerate(workflow["jobs"]["gate"]["steps"]):
        name = step.get("name") or step.get("uses")
        if not condition(step, context):
            context["steps"].append((name, "skipped", ""))
            if "id" in step:
                context["outcome"][step["id"]] = "skipped"
            continue
        uses = step.get("uses", "")
        inputs = {k: substitute(str(v), context) for k, v in step.get("with", {}).items()}
        if uses.startswith("actions/checkout@"):
            git(tmp, "clone", "-q", str(origin), str(workspace))
            git(workspace, "checkout", "-q", "--detach", head)
            status, log = 0, ""
        elif uses:
            status, log = _action(uses, inputs, workspace, record, code_scanning)
        else:
            status, log = _run_script(step, number, env, context, tmp, workspace)
        outcome = "success" if status == 0 else "failure"
        context["failed"] |= status != 0 and step.get("continue-on-error") is not True
        if "id" in step:
            context["outcome"][step["id"]] = outcome
        context["steps"].append((name, outcome, log))
    context["record"] = record
    return context


def _run_script(step: dict[str, Any], number: int, env: dict[str, str], context: Context,
                tmp: Path, workspace: Path) -> tuple[int, str]:
    output = tmp / f"output-{number}"
    output.touch()
    step_env = {**env, **context.get("env", {}), "GITHUB_OUTPUT": str(output),
                "GITHUB_ENV": str(tmp / f"env-{number}")}
    step_env |= {k: substitute(str(v), context) for k, v in step.get("env", {}).items()}
    script = tmp / f"step-{number}.sh"
    script.write_text(substitute(step["run"], context))
    cwd = substitute(step.get("working-directory", str(workspace)), context)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                          cwd=cwd, env=step_env, capture_output=True, text=True, check=False,
                          timeout=900)
    context.setdefault("env", {}).update(_key_values(tmp / f"env-{number}"))
    if "id" in step:
        context["outputs"][step["id"]] = _key_values(output)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="session")
def machine_pip(fresh: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pip as this machine is set up, for a runner whose HOME is a folder of its own: every
    configuration file's settings (`pip config list`) in one file pip reads, the PIP_*
    variables, and the machine's download cache (a runner's setup-python cache)."""
    python = str(fresh / "bin" / "python")
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                            text=True, check=True).stdout
    sections: dict[str, list[str]] = {}
    for line in listed.splitlines():
        match = re.fullmatch(r"([\w-]+)\.([\w-]+)=(.*)", line)  # `:env:.` ones come below
        if match:
            value = ast.literal_eval(match.group(3))
            sections.setdefault(match.group(1), []).append(f"{match.group(2)} = {value}")
    config = tmp_path_factory.mktemp("pip") / "pip.conf"
    config.write_text("".join(f"[{name}]\n" + "".join(f"{item}\n" for item in items)
                              for name, items in sections.items()))
    cache = subprocess.run([python, "-m", "pip", "cache", "dir"], capture_output=True,
                           text=True, check=True).stdout.strip()
    variables = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    return {**variables, "PIP_CONFIG_FILE": str(config), "PIP_CACHE_DIR": cache}


def team_repository(run: Run, tmp: Path) -> tuple[Path, str]:
    """The team's repository as `specpair init` and `specpair build` leave it, and the
    workflow init wrote."""
    origin = tmp / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    ok(run("specpair", "init", cwd=origin))
    ok(run("specpair", "build", cwd=origin))
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "specpair init")
    return origin, (origin / WORKFLOW).read_text()


def pull_request(run: Run, origin: Path, change: Callable[[Path], None]) -> str:
    git(origin, "checkout", "-q", "-b", "pull-request")
    change(origin)
    ok(run("specpair", "build", cwd=origin))  # outputs current
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "a pull request")
    head = git(origin, "rev-parse", "HEAD").strip()
    git(origin, "checkout", "-q", "main")
    return head


def installed_from(tmp: Path) -> dict[str, Any]:
    """Where the job's own virtual environment got specpair (pip's PEP 610 record)."""
    (venv,) = (tmp / "runner-temp").glob("specpair-venv.*")
    record = subprocess.run([str(venv / "bin" / "python"), "-I", "-c",
                             "import importlib.metadata as m; "
                             "print(m.distribution('specpair').read_text('direct_url.json'))"],
                            capture_output=True, text=True, check=True).stdout
    return dict(json.loads(record))


def test_a_hostile_pull_request_runs_none_of_its_code_and_gets_the_gates_own_result(
        run: Run, served: Served, machine_pip: dict[str, str], tmp_path: Path) -> None:
    origin, workflow_text = team_repository(run, tmp_path)
    markers, victim = tmp_path / "markers", tmp_path / "victim.md"
    markers.mkdir()
    victim.write_text("not the checklist\n")
    evil = evil_source(tmp_path, markers, served.tag)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(served.gitconfig.read_text()
                         + f'[url "file://{evil}"]\n\tinsteadOf = {EVIL_SOURCE}\n')
    # `check` fails on the waiver the pull request removed; nothing else may
    head = pull_request(run, origin, lambda repo: plant(repo, markers, victim))

    job = run_job(yaml.safe_load(workflow_text), origin, head, tmp_path,
                  {**machine_pip, "GIT_CONFIG_GLOBAL": str(gitconfig)})
    steps = {name: (outcome, log) for name, outcome, log in job["steps"]}
    shown = "\n".join(f"--- {n}: {o}\n{log[-3000:]}" for n, o, log in job["steps"])

    # none of the pull request's code ran, in any step, nor the source it named
    assert sorted(p.name for p in markers.iterdir()) == [], shown
    assert victim.read_text() == "not the checklist\n"
    # the install (the base branch's source, at the tag), the outputs current; the gate
    # failed on its own finding, with its own SARIF, from a fresh folder outside the checkout
    assert steps["Install the specpair release pinned in specpair.toml"][0] == "success", shown
    assert installed_from(tmp_path)["url"] == served.url
    assert steps["Runbooks valid, outputs current (`specpair build` regenerates them)"][0] \
        == "success", shown
    gate_outcome, gate_log = steps["Pre-deployment gate"]
    assert gate_outcome == "failure" and "SP101" in gate_log, shown
    assert steps["Findings in the job summary and as SARIF"][0] == "failure", shown
    assert steps["Findings to code scanning"][0] == "success", shown
    record: Path = job["record"]
    uploaded_from = Path((record / "uploaded-from").read_text())
    workspace = tmp_path / "work" / "repo"
    assert workspace not in uploaded_from.parents and uploaded_from.parent.name.startswith(
        "specpair-out."), uploaded_from
    sarif = json.loads((record / "uploaded.sarif").read_text())
    rules = {r["ruleId"] for run_ in sarif["runs"] for r in run_["results"]}
    assert "SP101" in rules and "PLANTED" not in rules, rules
    # the checklist was posted, its runbook text inert
    assert steps["Change-impact checklist"][0] == "success", shown
    assert steps["Post the checklist on the pull request"][0] == "success", shown
    comment = (record / "comment.md").read_text()
    # the title's change, one code span whose fence no backtick in it closes: no link,
    # image or mention anywhere in the comment
    change = f'pair.title: "DeepSeek-V3 with its built-in MTP layer" → {json.dumps(HOSTILE_TITLE)}'
    assert f"- ``{change}``\n" in comment, comment
    assert comment.count("@octocat") == 1 and comment.count("evil.example") == 1, comment
    # the job summary: the gate's own findings, then the checklist
    summary = (tmp_path / "summary.md").read_text()
    findings = summary.removesuffix(comment)
    assert summary.endswith(comment) and findings.startswith(
        "## specpair check: 1 pair(s) checked, 1 failing finding(s)"), summary
    assert "❌ `SP101` (error)" in findings and "PLANTED" not in findings, findings
    # the site was built with the packaged config, from the pull request's pages
    assert steps["Site pages"][0] == "success", shown
    assert steps["Site (strict), built with the config specpair init writes"][0] == \
        "success", shown
    (built,) = (tmp_path / "runner-temp").glob("specpair-site.*/built")
    page = (built / "pairs" / "deepseek-v3-mtp.html").read_text()
    assert "evil.example" in page and "<img src=x" not in page  # the pull request's pages


def test_a_clean_pull_request_passes_in_a_repository_without_code_scanning(
        run: Run, served: Served, machine_pip: dict[str, str], tmp_path: Path) -> None:
    """A private repository without code scanning: GitHub refuses the SARIF upload, and
    the job still passes, its findings in the job summary."""
    origin, workflow_text = team_repository(run, tmp_path)

    def deeper(repo: Path) -> None:
        runbook = repo / EXAMPLE
        runbook.write_text(runbook.read_text().replace("num_speculative_tokens: 3",
                                                       "num_speculative_tokens: 2"))
    head = pull_request(run, origin, deeper)

    job = run_job(yaml.safe_load(workflow_text), origin, head, tmp_path,
                  {**machine_pip, "GIT_CONFIG_GLOBAL": str(served.gitconfig)},
                  code_scanning=False)
    shown = "\n".join(f"--- {n}: {o}\n{log[-3000:]}" for n, o, log in job["steps"])
    outcomes = {name: outcome for name, outcome, _ in job["steps"]}
    # the upload ran and was refused; every other step passed, and so did the job
    assert outcomes.pop("Findings to code scanning") == "failure", shown
    assert NO_CODE_SCANNING in dict((n, log) for n, _, log in job["steps"])[
        "Findings to code scanning"]
    assert set(outcomes.values()) == {"success"} and not job["failed"], shown
    # installed as the README installs it: the same URL, the same tag, the served clone
    tagged = git(served.clone, "rev-parse", f"{served.tag}^{{commit}}").strip()
    assert installed_from(tmp_path) == {"url": served.url, "vcs_info": {
        "vcs": "git", "requested_revision": served.tag, "commit_id": tagged}}
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## specpair check: 1 pair(s) checked, 0 failing finding(s)")
    assert "➖ `SP101` (waived: " in summary, summary
    assert "num_speculative_tokens: 3 → 2" in summary  # the checklist follows
    assert (job["record"] / "comment.md").read_text() in summary
