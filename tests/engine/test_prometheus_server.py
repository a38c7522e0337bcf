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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from specpair.analyse.monitoring import for_engine
from tests.engine.metrics import PAIR, complete, query
from tests.engine.support import Server
from tests.support.promtool import rule_groups

# records that need what this server cannot show in seconds: none today; a record listed
# here must say why
NEEDS_MORE_THAN_A_MINUTE: dict[str, str] = {}
FIRST_REQUEST = "specpair:time_to_first_request_seconds"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def poll(ask: Callable[[], list[dict[str, Any]]], seconds: float) -> list[dict[str, Any]]:
    """`ask` until it answers with data (Prometheus may still be starting) or time is up."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            answer = ask()
        except OSError:
            answer = []
        if answer or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


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
        # The time to the first request exists exactly when this Prometheus saw the
        # finished-request counter at 0 (vLLM exports it at 0 from start-up). Run alone,
        # this test sends the server's first request, after Prometheus's first scrape; in
        # the engines session other tests served requests before this Prometheus started,
        # so it joins late and must have none. The rule samples once a minute: its first
        # sample counts once one of its steps has seen it, so traffic waits for that step
        # (and a late join is then one the rule had the chance to get wrong).
        done = for_engine(args["runbook_engine"]).requests_done
        counter = f'sum({done}{{specpair_pair="{PAIR}"}})'
        first_seen = poll(lambda: query(url, f"min_over_time({counter}[1h:1m])"), 90)
        assert first_seen, f"no {done} scraped\n" + (tmp_path / "prometheus.log").read_text()
        from_zero = float(first_seen[0]["value"][1]) == 0
        missing = records
        deadline = time.monotonic() + 120 + (60 if from_zero else 0)
        while time.monotonic() < deadline:
            complete(spec_server, model)  # traffic, so the rates have increases to see
            time.sleep(2)
            try:
                missing = [r for r in records if r not in NEEDS_MORE_THAN_A_MINUTE
                           and (r != FIRST_REQUEST or from_zero)
                           and not query(url, f'{r}{{specpair_pair="{PAIR}"}}')]
            except OSError:
                continue  # Prometheus still starting
            if not missing:
                break
        assert not missing, (f"records without data: {missing}\n"
                             + (tmp_path / "prometheus.log").read_text()[-3000:])
        first = query(url, f'{FIRST_REQUEST}{{specpair_pair="{PAIR}"}}')
        assert bool(first) == from_zero, (from_zero, first)
        tau = query(url, f'specpair:acceptance_length:rate5m{{specpair_pair="{PAIR}"}}')
        assert float(tau[0]["value"][1]) >= 1.0
        firing = query(url, 'ALERTS{alertstate="firing"}')
        assert firing == [], firing
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
