"""The vLLM defaults each release package applies, from that release's own CacheConfig
(nox -s engines): the block size, and the memory fraction in each KV sizing mode (0.34.0:
1.0 with the extensible cache on, 0.92 with it off; earlier releases: 0.92). The upgrade
checklist's "default 16 → 64" and the measured mode's "requested = total · 1.0" rest on
these."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.engine import releases
from tests.support.geometries import dense
from tests.support.pairs import make_pair

PROBE = """
import json
from vllm.config.cache import CacheConfig
found = {"block_size": CacheConfig.DEFAULT_BLOCK_SIZE}
if hasattr(CacheConfig, "resolved_gpu_memory_utilization"):
    for name, on in (("measured", True), ("pinned", False)):
        found[name] = CacheConfig(enable_extensible_kv_cache=on).resolved_gpu_memory_utilization
else:
    found["pinned"] = found["measured"] = CacheConfig().gpu_memory_utilization
print(json.dumps(found))
"""


def engine_defaults(release: str) -> dict[str, float]:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                            check=False, timeout=600,
                            env={**os.environ, **releases.env(release)})
    assert result.returncode == 0, result.stderr[-4000:]
    found: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("release", releases.VLLM)
def test_the_block_size_and_memory_fraction_defaults_are_the_releases(release: str) -> None:
    engine = engine_defaults(release)
    version = releases.version(release)
    for mode in ("pinned", "measured"):
        pair = make_pair(dense(36), dense(1), engine="vllm", version=version,
                         speculation={"method": "EAGLE3", "num_speculative_tokens": 3},
                         deployment={"kv_cache_sizing": mode})
        args = pair.release.server_args(pair, pair.gpu_spec)
        assert args.block_size == engine["block_size"], (release, mode)  # type: ignore[attr-defined]
        assert args.gpu_memory_utilization == engine[mode], (release, mode)  # type: ignore[attr-defined]
