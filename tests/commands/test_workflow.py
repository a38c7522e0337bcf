"""The gate workflow `specpair init` writes, read as text, and the change-impact checklist
it posts, rendered (issue 52). The workflow is also run step by step on a hostile pull
request, with actionlint, in tests/install/test_workflow.py (`nox -s install`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from specpair.commands.impact import PairImpact, impact, markdown
from specpair.commands.init import template
from specpair.load.project import SOURCE_PATTERN, requirement
from tests.support.git_repo import commit, edit, examples_repo

WORKFLOW: dict[str, Any] = yaml.safe_load(template("workflow.yml"))
STEPS: list[dict[str, Any]] = WORKFLOW["jobs"]["gate"]["steps"]
TEXT = template("workflow.yml").decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return examples_repo(tmp_path)


def scripts() -> list[tuple[str, str]]:
    return [(s.get("name", ""), s["run"]) for s in STEPS if "run" in s]


def test_actions_are_pinned_by_commit_with_their_tag_beside_it() -> None:
    uses = [line.strip() for line in TEXT.splitlines() if "uses:" in line]
    assert len(uses) == 3
    for line in uses:
        assert re.fullmatch(r"- uses: [\w./-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+", line), line


def test_the_checkout_keeps_no_token() -> None:
    (checkout,) = [s for s in STEPS if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False


def test_every_python_starts_isolated_and_the_install_runs_outside_the_checkout() -> None:
    """A `python` started in the checkout without -I imports the pull request's
    tomllib.py, pip/ or specpair/ first (the current folder leads sys.path)."""
    calls = 0
    command = re.compile(r'(?:^|\$\(|\|\|?|&&)\s*("?\$\w+(?:/bin/python)?"?|python[\d.]*)(\s+\S+)?')
    for name, script in scripts():
        for line in script.splitlines():
            for program, first in command.findall(line):
                if "python" in program.lower():
                    calls += 1
                    assert first.strip() == "-I", (name, line)
            # specpair and mkdocs only as modules of the isolated interpreter
            assert not re.match(r"\s*(specpair|mkdocs) ", line), (name, line)
    assert calls >= 13
    (install,) = [s for s in STEPS if s.get("id") == "install"]
    assert install["working-directory"] == "${{ runner.temp }}"
    assert '"$GITHUB_WORKSPACE/specpair.toml"' in install["run"]


def test_outputs_go_to_a_fresh_folder_and_a_failing_check_fails_its_step() -> None:
    for name, script in scripts():
        assert "|| true" not in script and "|| :" not in script, name
        for out in re.findall(r"--output (\S+)", script):
            assert out in ('"$findings"', '"$sarif"', '"$checklist"'), (name, out)
    (install,) = [s for s in STEPS if s.get("id") == "install"]
    assert 'out=$(mktemp -d "$RUNNER_TEMP/specpair-out.XXXXXX")' in install["run"]
    (sarif,) = [s for s in STEPS if s.get("id") == "sarif"]
    assert 'sarif="$SPECPAIR_OUT/specpair.sarif"' in sarif["run"]
    assert sarif["run"].rstrip().endswith('exit "$status"')
    (upload,) = [s for s in STEPS if "upload-sarif" in s.get("uses", "")]
    assert upload["with"]["sarif_file"] == "${{ steps.sarif.outputs.file }}"


def _install_script() -> list[str]:
    (install,) = [s for s in STEPS if s.get("id") == "install"]
    return [line.strip() for line in install["run"].splitlines()
            if not line.strip().startswith("#")]


def test_specpair_is_installed_from_the_base_branchs_source_at_the_release_tag() -> None:
    """Installing runs the package's code: the pull request picks only the release
    number (a tag of the trusted repository); the repository comes from the base
    branch's specpair.toml, as git holds it, never from the checkout."""
    script = _install_script()
    (pip,) = [line for line in script if " -m pip install " in line]
    assert pip.endswith(f'"{requirement("${source}", "${version}")}"'), pip
    (read_version,) = [line for line in script if line.startswith("version=")]
    assert '["specpair"]["version"]' in read_version and "source" not in read_version
    (read_source,) = [line for line in script if line.startswith("source=")]
    assert read_source.startswith('source=$(git -C "$GITHUB_WORKSPACE" cat-file blob '
                                  '"${trusted}:specpair.toml" | python -I -c ')
    assert 'trusted="origin/${BASE_REF}"' in script and "trusted=HEAD" in script
    # the same pattern as `specpair`'s own check of specpair.toml, and the version's
    assert f"if ! [[ $source =~ ^{SOURCE_PATTERN.pattern}$ ]]; then" in script
    assert "if ! [[ $version =~ ^[0-9]+(\\.[0-9]+){1,3}$ ]]; then" in script
    (install,) = [s for s in STEPS if s.get("id") == "install"]
    assert install["env"] == {"BASE_REF": "${{ github.base_ref }}"}


def test_no_step_fails_a_repository_without_code_scanning() -> None:
    """Most private repositories have no code scanning, and GitHub refuses their SARIF
    upload: that step may fail without failing the job, and the findings reach the job
    summary, which every repository has."""
    scanning = [s for s in STEPS if "codeql-action" in s.get("uses", "")]
    assert [s["uses"].split("@")[0] for s in scanning] == ["github/codeql-action/upload-sarif"]
    assert all(s.get("continue-on-error") is True for s in scanning)
    assert [s for s in STEPS if s.get("continue-on-error")] == scanning  # the gate fails
    (findings,) = [s for s in STEPS if s.get("id") == "sarif"]
    assert '--format markdown --output "$findings"' in findings["run"]
    assert 'cat "$findings" >> "$GITHUB_STEP_SUMMARY"' in findings["run"]
    # the summary before the upload is even attempted
    assert STEPS.index(findings) < STEPS.index(scanning[0])


def test_the_site_is_built_with_the_packaged_config_not_the_pull_requests() -> None:
    (site,) = [s for s in STEPS if "mkdocs build" in s.get("run", "")]
    assert site["working-directory"] == "${{ runner.temp }}"
    code = [line for line in site["run"].splitlines() if not line.strip().startswith("#")]
    assert [line for line in code if "site/mkdocs.yml" in line] == \
        ['config="$pristine/site/mkdocs.yml"']
    assert '-m mkdocs build --strict -f "$config"' in site["run"]


HOSTILE = [
    "x` [click](https://evil.example) `y",
    "`` ![i](https://evil.example/p.png) ``",
    "<img src=x onerror=alert(1)> <a href=https://evil.example>a</a>",
    "@octocat and @team/org ask about #12 at www.evil.example or https://evil.example",
    "line\n# heading\n- item\n\n<script>alert(1)</script>",
    "a\\` [b](c)",
]


def _rendered(text: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")  # CommonMark's reference behaviour
    return str(markdown_it.MarkdownIt("commonmark").render(text))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_runbook_text_in_the_checklist_is_inert_markdown(hostile: str) -> None:
    """Each place runbook text reaches the checklist: the pair's name, its checklist lines
    (specpair's words, commands in backticks, runbook paths and messages inside), what
    changed, the invalid runbooks, the revision names."""
    item = PairImpact(hostile, ["draft"], [f"pair.title: {hostile!r}", hostile], [
        f"Fix the pair: {hostile}", f"Run `specpair bench {hostile}` now",
        f"Gate: `specpair bench runbooks/{hostile}/runbook.yaml --against x` (then merge)"])
    text = markdown([item], [f"runbooks/x.yaml: {hostile}"], hostile, hostile)
    html = _rendered(text)
    assert "<a " not in html and "<img" not in html and "<script" not in html, html
    assert "<h1" not in html and html.count("<h2") == 1 and html.count("<h3") == 1, html
    # GitHub's mentions and issue links come from the rendered text: broken by a
    # zero-width space outside code
    outside_code = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    assert not re.search(r"[@#][\w/]", outside_code), outside_code


def test_specpairs_own_commands_stay_code() -> None:
    from specpair.commands.impact import code_span, inline, prose

    assert prose("re-check co-design (`specpair check`)") == \
        "re-check co-design (`specpair check`)"
    assert code_span("a`b") == "``a`b``" and code_span("`a") == "`` `a ``"
    assert inline("[x](y) @z") == "\\[x\\](y) @&#8203;z"


def test_a_runbook_title_in_a_real_change_reaches_the_checklist_inert(repo: Path) -> None:
    title = "x` [click](https://evil.example) @octocat `y"
    commit(repo, lambda r: edit(r, "runbooks/ling-3-flash-dspark/runbook.yaml",
                                "title: ", f"title: {title!r} # was: "))
    impacts, problems = impact(repo, "HEAD~1", "HEAD")
    html = _rendered(markdown(impacts, problems, "HEAD~1", "HEAD"))
    assert "evil.example" in html and "<a " not in html, html
    assert "@octocat" not in re.sub(r"<code>.*?</code>", "", html, flags=re.S)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_findings_in_the_job_summary_are_inert_markdown(hostile: str) -> None:
    """The job summary renders Markdown and HTML: each place runbook text reaches the
    findings there (the file, the message, the fix, a waiver's reason) stays text."""
    from specpair.commands.check import Report, markdown
    from specpair.model.errors import Location
    from specpair.model.findings import Finding

    where = Location(f"runbooks/{hostile}/runbook.yaml", 3, 5)
    findings = [Finding("SP101", "error", f"pinned to {hostile!r}", "target.revision",
                        f"pin `{hostile}` to a commit", where=where),
                Finding("SP104", "warning", hostile, "target", hostile, waived=hostile),
                Finding("SP602", "note", f"`specpair lock {hostile}`", "x", "", where=where)]
    text = markdown([Report(f"runbooks/{hostile}/runbook.yaml", hostile, findings)])
    html = _rendered(text)
    assert "<a " not in html and "<img" not in html and "<script" not in html, html
    assert "<h1" not in html and html.count("<h2") == 1 and "<h3" not in html, html
    assert html.count("<li>") == 3, html
    outside_code = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    assert not re.search(r"[@#][\w/]", outside_code), outside_code
    assert text.startswith("## specpair check: 1 pair(s) checked, 1 failing finding(s), "
                           "3 in all\n")
