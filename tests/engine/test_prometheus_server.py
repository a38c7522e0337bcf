"""A real Prometheus server (Debian's `prometheus`) scraping the real vLLM (CPU) server of
the session with the pair's generated rule file: every recording rule produces data from
the engine's own metric names, and no alert fires on a healthy server.

The scrape config relabels the series with the pair the way the generated PodMonitor does
(`specpair_pair`); scrapes and rule evaluations run every second so the test takes
seconds, not the production minutes.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from specpair.monitoring import for_engine
from tests.engine.conftest import Server
from tests.engine.test_metrics_rules import PAIR, complete
from tests.promtool import rule_groups

# records that need what this server cannot show in seconds: none today; a record listed
# here must say why
NEEDS_MORE_THAN_A_MINUTE: dict[str, str] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def query(url: str, expr: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?"
                                + urllib.parse.urlencode({"query": expr}), timeout=30) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_every_record_produces_data_in_a_real_prometheus(spec_server: Server, tiny_repo: Path,
                                                         tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    assert binary, "install Debian's prometheus package (nox -s engines does when root)"
    generated = tiny_repo / "runbooks" / PAIR / "generated"
    rules_file = generated / "prometheus-rules.yaml"
    target = urllib.parse.urlparse(spec_server.url).netloc
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(rules_file)],
              "scrape_configs": [{
                  "job_name": "engine", "metrics_path": "/metrics",
                  "static_configs": [{"targets": [target]}],
                  "relabel_configs": [{"action": "replace", "target_label": "specpair_pair",
                                       "replacement": PAIR}]}]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        args = json.loads((generated / "args.json").read_text())
        model = str(args["engines"][args["runbook_engine"]]["argv"][2])
        records = sorted({r["record"] for g in rule_groups(rules_file.read_text())
                          for r in g["rules"] if "record" in r})
        missing = records
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            complete(spec_server, model)  # traffic, so the rates have increases to see
            time.sleep(2)
            try:
                missing = [r for r in records if r not in NEEDS_MORE_THAN_A_MINUTE
                           and not query(url, f'{r}{{specpair_pair="{PAIR}"}}')]
            except OSError:
                continue  # Prometheus still starting
            if not missing:
                break
        assert not missing, (f"records without data: {missing}\n"
                             + (tmp_path / "prometheus.log").read_text()[-3000:])
        tau = query(url, f'specpair:acceptance_length:rate5m{{specpair_pair="{PAIR}"}}')
        assert float(tau[0]["value"][1]) >= 1.0
        firing = query(url, 'ALERTS{alertstate="firing"}')
        # The first-request rule takes the first sample Prometheus saw with a finished
        # request as the time of the first request. This Prometheus starts long after the
        # session's server served its first request (other engine tests ran in between),
        # so that rule may fire here, and only for that reason: Prometheus's first sample of
        # the counter is already above 0. Known false positive of the rule when a scrape
        # begins after the first request (the closing note names it); anything else fails.
        done = for_engine(args["runbook_engine"]).requests_done
        first_seen = query(url, f'min_over_time(sum({done}{{specpair_pair="{PAIR}"}})[1h:1s])')
        joined_late = bool(first_seen) and float(first_seen[0]["value"][1]) > 0
        unexplained = [a for a in firing if not (
            joined_late and a["metric"]["alertname"] == "SpecpairFirstRequestOverColdStartBudget")]
        assert unexplained == [], firing
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
