"""What Kubernetes does to a container's command, args and env values before it runs them:
`$(NAME)` becomes the variable's value (left as written when undefined), `$$` becomes `$`,
any other `$` stays. A line-by-line port of kubernetes/third_party/forked/golang/
expansion/expand.go (Expand, tryReadVariableName), because no kubelet runs here; tests
run manifest commands through it exactly as a pod would."""

from __future__ import annotations

from collections.abc import Mapping


def _read_name(rest: str) -> tuple[str, bool, int]:
    if rest[0] == "$":  # escaped operator
        return "$", False, 1
    if rest[0] == "(":
        for i in range(1, len(rest)):
            if rest[i] == ")":
                return rest[1:i], True, i + 1
        return "$(", False, 1  # incomplete reference
    return "$" + rest[0], False, 1


def expand(value: str, env: Mapping[str, str]) -> str:
    out, checkpoint, cursor = [], 0, 0
    while cursor < len(value):
        if value[cursor] == "$" and cursor + 1 < len(value):
            out.append(value[checkpoint:cursor])
            read, is_var, advance = _read_name(value[cursor + 1:])
            out.append(env.get(read, f"$({read})") if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + value[checkpoint:]


def expand_all(words: list[str], env: Mapping[str, str]) -> list[str]:
    return [expand(w, env) for w in words]
