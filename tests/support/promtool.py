"""Prometheus's own `promtool` (Debian package `prometheus`), run on generated rule files.

`nox -s tests` installs the package when it runs as root; elsewhere install it by hand.
Nothing here stands in for Prometheus: rules are checked and evaluated by promtool.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support import proc


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, ("promtool not found: install Debian's `prometheus` package "
                   "(nox -s tests does this when run as root)")
    return found


def check_rules(path: Path) -> str:
    result = proc.run([promtool(), "check", "rules", str(path)], capture_output=True,
                            text=True, check=False, cpu_s=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def run_unit_tests(rule_file: Path, tests: list[dict[str, Any]], folder: Path,
               evaluation_interval: str = "1m") -> subprocess.CompletedProcess[str]:
    """Run `promtool test rules` on unit tests (rule_files points at `rule_file`)."""
    spec = {"rule_files": [str(rule_file)], "evaluation_interval": evaluation_interval,
            "tests": tests}
    path = folder / f"{rule_file.stem}.test.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))
    return proc.run([promtool(), "test", "rules", str(path)], capture_output=True,
                          text=True, check=False, cpu_s=300)


def rule_groups(text: str) -> list[dict[str, Any]]:
    """The `groups` of a rule file, or of the PrometheusRule in a multi-document manifest."""
    for doc in yaml.safe_load_all(text):
        if doc and "groups" in doc:
            groups: list[dict[str, Any]] = doc["groups"]
            return groups
        if doc and doc.get("kind") == "PrometheusRule":
            groups = doc["spec"]["groups"]
            return groups
    raise AssertionError("no rule groups found")
