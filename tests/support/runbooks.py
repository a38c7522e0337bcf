"""Runbook texts the tests load or edit."""

from __future__ import annotations

MINIMAL = """\
pair: {name: demo, title: Demo, owner: me}
engine: {name: sglang, version: 0.5.23}
target: {repo: Qwen/Qwen3-8B, revision: 0123456789abcdef0123456789abcdef01234567}
draft: {repo: z-lab/Qwen3-8B-DFlash-b16, revision: 0123456789abcdef0123456789abcdef01234567}
speculation: {method: DFLASH, block_size: 16}
deployment: {gpu: H100-80GB, context_length: 32768}
acceptance: {slo: {min_length: 3.0}}
"""
