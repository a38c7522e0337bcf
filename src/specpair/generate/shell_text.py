"""Text that both the launch scripts and the staging script write (stage_script.py and
launch_files.py each import it, so neither imports the other for it)."""

from __future__ import annotations

from specpair.model.common import inert


def slug(engine: str) -> str:
    return engine.split()[0]


def cell_text(text: str) -> str:
    """Runbook text in a shell comment: one line, nothing that ends the comment, no
    control character (a `cat` of the script must not drive the terminal)."""
    return inert(" ".join(text.split()))


def k8s_literal(value: str) -> str:
    """A literal in a container's command, args or env value: Kubernetes expands
    `$(NAME)` there (and reduces `$$` to `$`), so every `$` is doubled; the only
    references left are the per-node ones (LWS_ENV) the manifest writes itself."""
    return value.replace("$", "$$")
