"""The schedule file as a YAML node tree: line numbers, duplicate keys, merge keys.

PyYAML's ``safe_load`` forgets where each value came from and silently keeps the
last of two equal keys. The loader works on the composed node tree instead:
every node knows its line (``start_mark.line + 1``), duplicate keys are found
here, and scalars are built one at a time with PyYAML's safe constructor (so
``2026-12-31`` is a date and ``true`` a bool, as in ``safe_load``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rota.scheduler.schedule_file.errors import Problem

_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class Report:
    """The problems found in one file, each at most once."""

    file: str
    problems: list[Problem] = field(default_factory=list)

    def add(self, at: Node | int, message: str) -> None:
        line = at if isinstance(at, int) else line_of(at)
        problem = Problem(self.file, line, message)
        if problem not in self.problems:
            self.problems.append(problem)


@dataclass(frozen=True)
class Entry:
    """One ``key: value`` of a mapping."""

    key: str
    key_node: Node
    value: Node


def line_of(node: Node) -> int:
    return int(node.start_mark.line) + 1


def compose(text: str, report: Report) -> Node | None:
    """The single document of ``text``; problems reported, ``None`` if there is none."""
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else 1
        report.add(line, f"bad YAML: {_yaml_reason(exc)}")
        return None
    except yaml.YAMLError as exc:
        report.add(1, f"bad YAML: {exc}")
        return None
    if not documents:
        report.add(1, "the file is empty: expected a mapping with job_types and schedules")
        return None
    for extra in documents[1:]:
        report.add(extra, "more than one YAML document: put everything in one")
    find_duplicate_keys(documents[0], report)
    return documents[0]


def _yaml_reason(exc: yaml.MarkedYAMLError) -> str:
    reason = " ".join(p for p in (exc.context, exc.problem) if p)
    if "alias" in reason or "anchor" in reason:
        reason += ' (a value starting with * or & must be quoted, like cron: "*/15 * * * *")'
    return reason


def find_duplicate_keys(root: Node, report: Report) -> None:
    """Report every key that appears twice in one mapping, anywhere in the tree."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # an alias: the same node again
            continue
        seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            first_line: dict[object, int] = {}
            for key_node, value_node in node.value:
                stack.append(value_node)
                if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
                    continue
                key = _key(key_node)
                if key is None or not _hashable(key):
                    continue
                if key in first_line:
                    report.add(key_node, f"duplicate key {key!r} (first at line {first_line[key]})")
                else:
                    first_line[key] = line_of(key_node)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def entries(node: MappingNode, owner: str, report: Report) -> list[Entry]:
    """The entries of a mapping, with ``<<: *anchor`` merge keys expanded.

    Keys written in the mapping win over merged ones, as in YAML's merge key
    rule; a key that is not a string is reported and left out.
    """
    own: list[Entry] = []
    merged: list[Entry] = []
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            merged.extend(_merged_entries(value_node, owner, report))
            continue
        key = _key(key_node)
        if not isinstance(key, str):
            report.add(key_node, f"{owner}: a key must be a string, not {_describe(key_node)}")
            continue
        own.append(Entry(key, key_node, value_node))
    own_keys = {e.key for e in own}
    result = list(own)
    for e in merged:
        if e.key not in own_keys:
            own_keys.add(e.key)
            result.append(e)
    return result


def _merged_entries(node: Node, owner: str, report: Report) -> list[Entry]:
    sources = node.value if isinstance(node, SequenceNode) else [node]
    result: list[Entry] = []
    for source in sources:
        if isinstance(source, MappingNode):
            result.extend(entries(source, owner, report))
        else:
            report.add(source, f"{owner}: << must merge a mapping")
    return result


def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


def construct(node: Node) -> object:
    """The Python value of a node, as ``yaml.safe_load`` would build it.

    Raises ``ValueError`` for a value YAML cannot build (``2026-13-01``).
    """
    try:
        return SafeConstructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        reason = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else exc
        raise ValueError(f"{node.value!r} is not a valid value: {reason}") from None


def _key(node: Node) -> object:
    """A key's value, or ``None`` for a key that is not a buildable scalar."""
    if not isinstance(node, ScalarNode):
        return None
    try:
        return construct(node)
    except ValueError:
        return None


def _describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return f"{node.value!r} (quote it)"
