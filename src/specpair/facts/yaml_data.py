"""YAML for the package's own data files and other trusted-shape documents.

The C parser (libyaml, in every PyYAML wheel) builds the same Python objects as the pure
Python one with the same resolver, about ten times faster: published_points.yaml took
4.4 s to read in pure Python, paid by every process that asks the latency model.
"""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader)  # PyYAML built without libyaml has only the first


def safe_load(text: str) -> Any:
    """`yaml.safe_load` through the C parser where PyYAML has it."""
    return yaml.load(text, Loader=SafeLoader)
