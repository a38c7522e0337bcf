"""`specpair budget` what-ifs say when the weights do not fit instead of asking for an
impossible memory fraction, label every negative number, and refuse what `validate`
refuses."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specpair", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def negative_lines_say_so(text: str) -> None:
    for row in text.splitlines():
        if re.search(r"\| -[0-9,]+ B", row):
            assert "negative:" in row, row


def test_weights_that_do_not_fit_are_said_so() -> None:
    """DeepSeek-V3 on two H200s: its ~690 GB of weights need far more than a GPU per rank."""
    done = cli("budget", "runbooks/deepseek-v3-mtp/runbook.yaml", "--tp", "2")
    assert done.returncode == 0, done.stderr
    (verdict,) = [r for r in done.stdout.splitlines() if r.startswith("| verdict")]
    assert "the weights do not fit" in verdict
    assert "raise it above" not in verdict
    assert not re.search(r"above [1-9]\.", done.stdout)  # a fraction can never exceed 1
    negative_lines_say_so(done.stdout)


def test_a_fraction_that_can_help_is_still_named() -> None:
    done = cli("budget", "runbooks/deepseek-v3-mtp/runbook.yaml", "--memory-fraction", "0.3")
    above = [float(x) for x in re.findall(r"raise it above ([0-9.]+)", done.stdout)]
    assert above and all(0.3 < x < 1 for x in above)
    negative_lines_say_so(done.stdout)


def test_vllm_negative_kv_is_explained() -> None:
    done = cli("budget", "runbooks/llama33-70b-eagle3-vllm/runbook.yaml", "--tp", "1")
    assert done.returncode == 0, done.stderr
    assert "nothing is left for the KV cache" in done.stdout
    negative_lines_say_so(done.stdout)


def test_a_what_if_validate_refuses_is_refused(tmp_path: Path) -> None:
    """16 ranks on one 8-GPU node: the same rule, word for word, as `validate`."""
    shutil.copytree(REPO / "runbooks" / "deepseek-v3-mtp",
                    tmp_path / "runbooks" / "deepseek-v3-mtp",
                    ignore=shutil.ignore_patterns("generated"))
    runbook = tmp_path / "runbooks" / "deepseek-v3-mtp" / "runbook.yaml"
    text = runbook.read_text()
    assert "tensor: 8" in text
    runbook.write_text(text.replace("tensor: 8", "tensor: 16"))
    validated = cli("validate", "runbooks", cwd=tmp_path)
    assert validated.returncode != 0
    (rule,) = re.findall(r"tensor × pipeline × data = 16 ranks[^\n]*", validated.stdout
                         + validated.stderr)
    what_if = cli("budget", "runbooks/deepseek-v3-mtp/runbook.yaml", "--tp", "16")
    assert what_if.returncode != 0
    assert rule in what_if.stderr and "| verdict" not in what_if.stdout


def test_a_deployment_that_does_not_fit_shows_no_headroom_or_capacity_share() -> None:
    """Issue 51: a budget that does not fit printed 0.00 GiB of headroom and "the draft
    costs 0.0% of the token capacity", as if it fitted with nothing to spare. 70B in BF16
    on one H100 leaves nothing for the KV cache (vLLM's own start-up refuses it)."""
    result = cli("budget", "runbooks/llama33-70b-eagle3-vllm/runbook.yaml", "--tp", "1")
    assert result.returncode == 0, result.stderr
    (headroom,) = [x for x in result.stdout.splitlines() if x.startswith("| headroom")]
    assert "GiB" not in headroom and headroom.count("does not fit") == 2, headroom
    assert "does not fit:" in result.stdout  # the verdict, with the engine's reason
    assert "of the token capacity and holds" not in result.stdout
    assert "No capacity to compare" in result.stdout


def test_a_what_if_the_budget_refuses_is_located_at_the_option() -> None:
    """Issue 51: `--tp 3` was refused "at runbook.yaml:24", a line that says tensor: 4.
    The heads do not split over the option's 3 ranks: the option is where to change it."""
    result = cli("budget", "runbooks/llama33-70b-eagle3-vllm/runbook.yaml", "--tp", "3")
    assert result.returncode != 0
    located = [x for x in result.stderr.splitlines() if "do not split over 3 ranks" in x]
    assert located, result.stderr
    assert all(x.startswith("command line: --tp (deployment.parallel.tensor): ")
               for x in located), located
    assert "runbook.yaml:" not in result.stderr
    # a rule `validate` applies names the option too
    wide = cli("budget", "runbooks/ling-3-flash-dspark/runbook.yaml", "--tp", "16")
    assert "command line: --tp (deployment.parallel): tensor × pipeline × data = 16 " \
        "ranks" in wide.stderr, wide.stderr


def test_a_smaller_draft_kv_dtype_on_sglang_is_said_truthfully() -> None:
    """Issue 51: `--draft-kv-dtype fp8_e4m3` on SGLang's EAGLE family printed "the
    difference of -2048 B per token comes out of the slack". SGLang 0.5.23 reserves the
    draft pool by scaling the target's cell at the target's dtype (engines/sglang_0_5_23/
    kv_cells.py), so the capacity stays; the draft runner allocates less, reserved for
    nothing. A larger draft dtype still takes its excess from the slack."""
    runbook = "runbooks/llama31-8b-eagle3/runbook.jsonnet"
    plain = cli("budget", runbook)
    smaller = cli("budget", runbook, "--draft-kv-dtype", "fp8_e4m3")
    assert smaller.returncode == 0, smaller.stderr
    assert not re.search(r"-[0-9,]+ B per token", smaller.stdout), smaller.stdout

    def capacity(text: str) -> list[str]:
        return [x for x in text.splitlines() if x.startswith("| token capacity")]
    assert capacity(smaller.stdout) == capacity(plain.stdout)
    notes = [x for x in smaller.stdout.splitlines() if "draft runner allocates" in x]
    assert notes
    for note in notes:
        assert "2048 B per token are reserved for the draft and stay unused" in note, note
        assert "comes out of the slack" not in note
        assert "the token capacity stays that of the target's dtype (auto)" in note
    larger = cli("budget", runbook, "--kv-dtype", "fp8_e4m3", "--draft-kv-dtype", "bf16")
    assert "the difference of 2048 B per token comes out of the slack" in larger.stdout
