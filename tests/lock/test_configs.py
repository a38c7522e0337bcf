"""The config.json `specpair verify` hands an engine: the checkpoint's own file, from a
local folder, from the hub at the locked commit (through huggingface_hub's cache, so a
second run asks no hub), or named by the user; a clear refusal otherwise. The hub is a
local server speaking its protocol to the real client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specpair.lock.configs import config_folder
from specpair.model.errors import SpecpairError
from specpair.model.lock import Source
from specpair.model.runbook import Artifact
from tests.support.checkpoints import llama_config
from tests.support.hubserver import HubServer, Repo

SOURCE = Source(path="unused")


def folder_with_config(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(llama_config()))
    return root


def test_a_local_folder_or_a_named_config_json(tmp_path: Path) -> None:
    ckpt = folder_with_config(tmp_path / "ckpt")
    spec = Artifact(path=str(ckpt))
    assert config_folder("target", spec, SOURCE, None, True) == ckpt.resolve()
    assert config_folder("target", spec, SOURCE, str(ckpt / "config.json"), True) == \
        ckpt.resolve()


def test_a_file_the_engines_would_not_open_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "target.json"
    other.write_text("{}")
    with pytest.raises(SpecpairError, match=r"neither a folder nor a file called config\.json"):
        config_folder("target", Artifact(path=str(tmp_path)), SOURCE, str(other), True)
    with pytest.raises(SpecpairError, match=r"no config\.json in"):
        config_folder("draft", Artifact(path=str(tmp_path)), SOURCE, None, True)


FETCH = """
import sys
from specpair.lock.configs import config_folder
from specpair.model.lock import Source
from specpair.model.runbook import Artifact
from specpair.model.errors import SpecpairError
try:
    found = config_folder("target", Artifact(repo="org/model", revision="main"),
                          Source(repo="org/model", revision="main", commit=sys.argv[1]), None,
                          sys.argv[2] == "offline")
except SpecpairError as exc:
    print(exc.render()); sys.exit(1)
print((found / "config.json").read_text())
"""


def fetch(hub: HubServer, home: Path, commit: str, mode: str) -> subprocess.CompletedProcess[str]:
    """In a process of its own: huggingface_hub reads HF_ENDPOINT and HF_HOME at import."""
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(home),
           "HF_HUB_DISABLE_TELEMETRY": "1", "SPECPAIR_HUB_TIMEOUT_S": "5"}
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run([sys.executable, "-c", FETCH, commit, mode], env=env,
                          capture_output=True, text=True, check=False, timeout=120)


def test_the_hub_at_the_locked_commit_then_the_cache_offline(tmp_path: Path) -> None:
    config = json.dumps(llama_config(layers=3)).encode()
    with HubServer() as hub:
        hub.repos["org/model"] = Repo()
        pinned = hub.repos["org/model"].commit({"config.json": config})
        hub.repos["org/model"].commit({"config.json": b'{"moved": true}'})  # main moves on
        online = fetch(hub, tmp_path / "hf", pinned, "online")
        assert online.returncode == 0, online.stdout + online.stderr
        assert online.stdout.strip() == config.decode()  # the locked commit's, not main's
        hub.requests.clear()
        offline = fetch(hub, tmp_path / "hf", pinned, "offline")
        assert offline.returncode == 0, offline.stdout + offline.stderr
        assert offline.stdout.strip() == config.decode() and hub.requests == []
        missing = fetch(hub, tmp_path / "empty", pinned, "offline")
    assert missing.returncode == 1
    assert "not in the local hub cache" in missing.stdout and "--target-config" in missing.stdout
