"""What `specpair lock` costs per artifact: requests and bytes against a local hub.

Builds checkpoints of growing size (shards × layers), serves them from the test hub
server on 127.0.0.1 and locks each one through the real huggingface_hub client. Reports,
per artifact: HTTP requests, bytes transferred, weight bytes, and their ratio.

    python benchmarks/lock_cost.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.checkpoints import llama_config, write_checkpoint
from tests.support.hubserver import HubServer, Repo, files_of

CASES = [("1 shard", 1, 4), ("3 shards", 3, 12), ("8 shards", 8, 24)]


def main() -> None:
    print(f"{'artifact':>10} {'requests':>9} {'bytes sent':>12} {'weight bytes':>14} "
          f"{'ratio':>9} {'seconds':>8}")
    with tempfile.TemporaryDirectory() as tmp, HubServer() as hub:
        os.environ.update(HF_ENDPOINT=hub.url, HF_HOME=str(Path(tmp) / "hf"),
                          HF_HUB_DISABLE_TELEMETRY="1")
        from specpair.lock.hub import resolve_checkpoint
        from specpair.lock.hub_remote import HubCheckpoint

        for label, shards, layers in CASES:
            folder = Path(tmp) / label.replace(" ", "-")
            config = llama_config(hidden=1024, layers=layers, heads=8, kv_heads=4,
                                  intermediate=2816)
            write_checkpoint(folder, config, shards=shards)
            repo = f"bench/{folder.name}"
            hub.repos[repo] = Repo()
            hub.repos[repo].commit(files_of(folder))
            hub.requests.clear()
            hub.bytes_sent.clear()
            start = time.perf_counter()
            locked, _ = resolve_checkpoint(HubCheckpoint(repo, "main"))
            elapsed = time.perf_counter() - start
            weight = locked.weights.weight_bytes
            sent = hub.total_bytes()
            print(f"{label:>10} {len(hub.requests):>9} {sent:>12,} {weight:>14,} "
                  f"{sent / weight:>9.5f} {elapsed:>8.2f}")


if __name__ == "__main__":
    main()
