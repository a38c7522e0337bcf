"""Editing a runbook's YAML text: the span of each changed field's value (PyYAML's
pure-Python composer gives character offsets), the splices that replace it or insert a
missing key into its innermost mapping, and scalars written so they read back as
themselves."""

from __future__ import annotations

import yaml

from specpair.load.edit_splices import Draft, FieldValue, Scalar, Splice, Tree, dotted, put


def yaml_scalar(value: Scalar, style: str | None = None) -> str:
    """`value` as a YAML scalar that reads back as the same type: plain when the resolver
    keeps it a string (H200-141GB), quoted when it would not ("yes", "1e3", "on"). A string
    replacing a quoted one keeps that quote style."""
    quoted: str | None = None
    if isinstance(value, str):
        plain_text = value.isprintable()  # no line breaks, no control characters
        if style == '"' or not plain_text:
            quoted = '"'  # escapes are possible only in double quotes
        elif style == "'":
            return "'" + value.replace("'", "''") + "'"
    # the emitter's own decision (and escapes), in flow context, stricter than block context
    out = yaml.safe_dump([value], default_flow_style=True, default_style=quoted,
                         allow_unicode=True, width=1 << 30)
    return out.strip()[1:-1]


def _yaml_flow(tree: Tree) -> str:
    return "{" + ", ".join(f"{yaml_scalar(k)}: {_yaml_value(v)}" for k, v in tree.items()) + "}"


def _yaml_value(value: Scalar | Tree) -> str:
    return _yaml_flow(value) if isinstance(value, dict) else yaml_scalar(value)


def _yaml_entry(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return key_node, value_node
    return None


def _yaml_is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def yaml_draft(text: str, changes: list[FieldValue], newline: str) -> Draft:
    draft = Draft()
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None:  # an empty file never loads as a runbook; kept for the type checker
        draft.refusals.append("the file holds no YAML document")
        return draft
    inserts: dict[int, tuple[yaml.Node, int, Tree]] = {}
    for path, value in changes:
        node: yaml.Node = root
        shown = dotted(path)
        for i, key in enumerate(path):
            where = dotted(path[:i])
            if i and _yaml_is_null(node):  # `parallel:` with no value: fill it in
                put(inserts.setdefault(id(node), (node, i, {}))[2], path[i:], value)
                break
            if not isinstance(node, yaml.MappingNode):
                draft.refusals.append(f"{shown}: {where} is not a mapping in the file; "
                                      "edit it by hand")
                break
            entry = _yaml_entry(node, key)
            if entry is None:
                put(inserts.setdefault(id(node), (node, i, {}))[2], path[i:], value)
                break
            key_node, value_node = entry
            here = dotted(path[:i + 1])
            if value_node.start_mark.index < key_node.end_mark.index:
                draft.refusals.append(f"{shown}: {here} is an alias (*name) of a value "
                                      "defined elsewhere; edit it by hand")
                break
            if text.startswith("&", value_node.start_mark.index):
                draft.refusals.append(f"{shown}: {here} carries an anchor (&name) that "
                                      "aliases share; edit it by hand")
                break
            if i == len(path) - 1:
                if not isinstance(value_node, yaml.ScalarNode):
                    draft.refusals.append(f"{shown}: the file holds a mapping or list here; "
                                          "replacing it with one value is not done in place")
                else:
                    draft.splices.append(_yaml_replace(text, value_node, value))
                break
            node = value_node
    for node, depth, tree in inserts.values():
        draft.splices.append(_yaml_insert(text, node, depth, tree, newline))
    return draft


def _yaml_replace(text: str, node: yaml.ScalarNode, value: Scalar) -> Splice:
    start, end = node.start_mark.index, node.end_mark.index
    style = node.style
    if style in ("|", ">"):  # the span runs to the next line; keep the line breaks
        end = start + len(text[start:end].rstrip())
        style = None
    rendered = yaml_scalar(value, style)
    if start == end:  # `key:` with no value: the mark sits right after the colon
        rendered = " " + rendered
    return Splice(start, end, rendered)


def _yaml_insert(text: str, node: yaml.Node, depth: int, tree: Tree, newline: str) -> Splice:
    if _yaml_is_null(node):
        start, end = node.start_mark.index, node.end_mark.index
        return Splice(start, end, (" " if start == end else "") + _yaml_flow(tree), -depth)
    assert isinstance(node, yaml.MappingNode)
    if node.flow_style:
        if node.value:
            at = node.value[-1][1].end_mark.index
            return Splice(at, at, ", " + _yaml_flow(tree)[1:-1], -depth)
        at = text.rindex("}", node.start_mark.index, node.end_mark.index)
        return Splice(at, at, _yaml_flow(tree)[1:-1], -depth)
    indent = " " * node.value[0][0].start_mark.column
    at = _yaml_block_end(text, node)
    lines = [f"{indent}{yaml_scalar(k)}: {_yaml_value(v)}" for k, v in tree.items()]
    if at == len(text) and not text.endswith("\n"):  # keep the file's missing final newline
        return Splice(at, at, "".join(newline + line for line in lines), -depth)
    return Splice(at, at, "".join(line + newline for line in lines), -depth)


def _yaml_block_end(text: str, node: yaml.MappingNode) -> int:
    """Where a new entry of a block mapping goes: the start of the line after its last
    content (after a trailing comment on that line; before blank or comment lines that
    follow, which belong to what comes next), or the end of a file without a final
    line break."""
    leaf: yaml.Node = node
    while isinstance(leaf, (yaml.MappingNode, yaml.SequenceNode)) and not leaf.flow_style \
            and leaf.value:
        last = leaf.value[-1]
        leaf = last[1] if isinstance(leaf, yaml.MappingNode) else last
    start, end = leaf.start_mark.index, leaf.end_mark.index
    if isinstance(leaf, yaml.ScalarNode) and leaf.style in ("|", ">"):
        header = text[start:text.find("\n", start)].split("#")[0]
        if "+" in header:  # keep chomping: the trailing blank lines are the value's
            return end
        end = start + len(text[start:end].rstrip())
    line_end = text.find("\n", end)
    return len(text) if line_end == -1 else line_end + 1


