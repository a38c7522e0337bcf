"""Rewrite README.md's architecture table from the registries (specpair.engines.verified_layouts).

    PYTHONPATH=src python tools/readme_architectures.py

tests/engines/test_registry.py fails while the README's table differs from the generated one.
"""

from __future__ import annotations

from pathlib import Path

from specpair.engines.verified_layouts import README_BEGIN, README_END, architectures_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def main() -> None:
    text = README.read_text(encoding="utf-8")
    begin = text.index(README_BEGIN)
    end = text.index(README_END) + len(README_END)
    indent = text[text.rindex("\n", 0, begin) + 1:begin]
    table = "\n".join(indent + line if line else ""
                      for line in architectures_markdown().rstrip("\n").split("\n"))
    README.write_text(text[:begin - len(indent)] + table + text[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
