"""Where a what-if's problem is: the command-line option that set the value, not the runbook
line that says otherwise (`specpair budget RUNBOOK --tp 3` is refused for the 3, which the
runbook never wrote)."""

from __future__ import annotations

from specpair.model.errors import Location, Problem

# each what-if option and the runbook field it replaces
OPTION_FIELDS = {
    "--gpu": "deployment.gpu",
    "--tp": "deployment.parallel.tensor",
    "--kv-dtype": "deployment.kv_cache_dtype",
    "--draft-kv-dtype": "deployment.draft_kv_cache_dtype",
    "--memory-fraction": "deployment.memory_fraction",
    "--context-length": "deployment.context_length",
}

COMMAND_LINE = "command line"


def _option(field: str, given: set[str]) -> str | None:
    """The given option whose field is `field`, inside it, or holds it (a rule about
    `deployment.parallel` as a whole is about the --tp that changed it)."""
    for option in sorted(given):
        path = OPTION_FIELDS.get(option)
        if path is not None and field and (
                field == path or field.startswith(f"{path}.") or path.startswith(f"{field}.")):
            return option
    return None


def locate(problems: list[Problem], given: set[str]) -> list[Problem]:
    """`problems` with each one a given option caused located at that option."""
    out = []
    for problem in problems:
        option = _option(problem.location.field, given)
        if option is None:
            out.append(problem)
        else:
            where = Location(COMMAND_LINE, 0, 0, f"{option} ({problem.location.field})")
            out.append(Problem(where, problem.message, problem.hint))
    return out
