"""The cold-start model downloads each artifact on as many connections as the generated
staging script's `hf download` opens: counted on a local hub by huggingface_hub itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from specpair.analyse.analysis import Analysis
from specpair.analyse.staging import HF_DOWNLOAD_WORKERS, plan
from specpair.generate import launch_files
from tests.support import proc
from tests.support.geometries import dense
from tests.support.hubserver import HubServer, Repo
from tests.support.k8s_expansion import expand_all
from tests.support.kubernetes import workload
from tests.support.pairs import make_pair, with_runbook


def test_hf_download_opens_the_modelled_number_of_streams(tmp_path: Path) -> None:
    with HubServer() as hub:
        files = {"config.json": b"{}"}
        # distinct contents: identical files share one blob and download once
        files |= {f"model-{i:05d}-of-00012.safetensors": bytes([i]) * 1000 for i in range(12)}
        hub.repos["org/sharded"] = Repo()
        commit = hub.repos["org/sharded"].commit(files)
        hub.file_delay_s = 0.5
        hub.repos["org/draft"] = Repo()
        draft = hub.repos["org/draft"].commit({"config.json": b"{}",
                                               "model.safetensors": bytes(1000)})
        # serial: one artifact at a time, so the count is one download's connections
        pair = with_runbook(make_pair(dense(36), dense(5)),
                            target={"repo": "org/sharded", "revision": commit},
                            draft={"repo": "org/draft", "revision": draft},
                            staging={"mode": "serial"})
        doc = workload(launch_files.generate(Analysis(pair))["deployment.k8s.yaml"])
        # as the kubelet runs it: `$(NAME)` expanded, `$$` reduced to `$`
        init = expand_all(doc["spec"]["template"]["spec"]["initContainers"][0]["command"],
                          {"HF_HOME": "/models"})
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "models"),
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        env.pop("HF_HUB_OFFLINE", None)
        done = proc.run(init, env=env, capture_output=True, text=True, cpu_s=120,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert hub.most_in_flight == HF_DOWNLOAD_WORKERS == 8


def test_a_large_sharded_target_is_link_bound() -> None:
    """960 GB over a 1.25 GB/s link on 0.5 GB/s streams: 8 streams fill the link, so the
    download takes bytes / link (one stream alone would take bytes / stream, 1,920 s)."""
    pair = make_pair(dense(36), dense(5), target_bytes=960 * 10**9, draft_bytes=10**9)
    steps = {s.name: s for s in plan(pair).steps}
    link = pair.runbook.staging.network_bandwidth_bytes_per_s
    assert steps["stage"].seconds == round(961e9 / link, 1)
    serial = plan(pair, "serial")
    assert {s.name: s for s in serial.steps}["stage"].seconds == round(961e9 / link, 1)
