"""The schedule file as a YAML node tree: line numbers, duplicate keys, merge keys.

PyYAML's ``safe_load`` forgets where each value came from and silently keeps the
last of two equal keys. The loader works on the composed node tree instead:
every node knows its line (``start_mark.line + 1``), duplicate keys are found
here, and scalars are built one at a time with PyYAML's safe constructor (so
``2026-12-31`` is a date and ``true`` a bool, as in ``safe_load``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


# PyYAML's C parser (libyaml) where it is installed: ten times faster, same marks.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 100  # mappings and lists nested in each other, in the whole file
# What aliases (*name) may add to the values written out: an alias counts as
# every value it stands for, so an "alias bomb" (each level ten aliases of the
# one before) is refused before anything builds it.
MAX_ALIAS_VALUES = 100_000
ALIAS_FACTOR = 2  # or twice the values written out, for a large file
# Tags a schedule file may use (written or implied); !!set, !!omap, !!python/...
# and local tags are refused.
_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset(
    _TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary", "merge")
)
_SEQ_TAG = _TAG + "seq"
_STR_TAG = _TAG + "str"
_MAP_TAG = _TAG + "map"


class _Stop(Exception):
    """The file cannot be read further; the problem is reported."""


def compose(text: str, report: Report) -> Node | None:
    """The single document of ``text``; problems reported, ``None`` if there is none.

    Composed here from the parser's events, without recursion: nesting deeper
    than ``MAX_DEPTH``, a recursive alias, and aliases that expand to more
    than ``MAX_ALIAS_VALUES`` values are problems at their line, found before
    anything is built from them.
    """
    try:
        documents = _Composer(report).compose(text)
    except _Stop:
        return None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else 1
        report.add(line, f"bad YAML: {_yaml_reason(exc)}")
        return None
    except yaml.reader.ReaderError as exc:
        report.add(_reader_line(text, exc), f"bad YAML: {_reader_reason(exc)}")
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


class _Composer:
    """PyYAML's composer, without recursion and with the limits above."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.resolver: Any = yaml.resolver.Resolver()  # untyped in PyYAML's stubs
        self.resolved: dict[tuple[str, tuple[bool, bool]], str] = {}
        self.anchors: dict[str, Node] = {}
        self.size: dict[int, int] = {}  # id(node) -> values it stands for, aliases expanded
        self.open: set[int] = set()  # collections not yet closed
        self.written = 0
        self.aliased = 0

    def compose(self, text: str) -> list[Node]:
        documents: list[Node] = []
        # Each frame: the open collection, the values it stands for, a pending key.
        stack: list[list[Any]] = []

        def attach(node: Node) -> None:
            if not stack:
                documents.append(node)
                return
            frame = stack[-1]
            frame[1] += self.size[id(node)]
            if isinstance(frame[0], SequenceNode):
                frame[0].value.append(node)
            elif frame[2] is None:
                frame[2] = node
            else:
                frame[0].value.append((frame[2], node))
                frame[2] = None

        event: Any  # libyaml's events and marks are typed apart from PyYAML's
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent):
                attach(self._alias(event))
            elif isinstance(event, yaml.ScalarEvent):
                start: Any = event.start_mark  # libyaml's Mark is typed apart from PyYAML's
                end: Any = event.end_mark
                node: Node = ScalarNode(
                    self._scalar_tag(event), event.value, start, end, style=event.style
                )
                self._made(node, event.anchor, 1)
                attach(node)
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                if len(stack) >= MAX_DEPTH:
                    self._stop(event, f"nested more than {MAX_DEPTH} levels deep")
                node = self._collection(event)
                self._made(node, event.anchor, None)
                self.open.add(id(node))
                stack.append([node, 1, None])
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                node, size, _ = stack.pop()
                node.end_mark = event.end_mark
                self.open.discard(id(node))
                self.size[id(node)] = size
                attach(node)
            elif isinstance(event, yaml.DocumentStartEvent):
                self.anchors = {}
        return documents

    def _scalar_tag(self, event: Any) -> str:
        if event.tag is not None and event.tag != "!":
            if event.tag in _SCALAR_TAGS:
                return str(event.tag)
            self._refuse_tag(event, "a plain value")
        key = (event.value, event.implicit)
        tag = self.resolved.get(key)
        if tag is None:
            tag = str(self.resolver.resolve(ScalarNode, event.value, event.implicit))
            if len(self.resolved) < 10_000:
                self.resolved[key] = tag
        return tag

    def _collection(self, event: Any) -> Node:
        is_seq = isinstance(event, yaml.SequenceStartEvent)
        default = _SEQ_TAG if is_seq else _MAP_TAG
        if event.tag is not None and event.tag not in ("!", default):
            self._refuse_tag(event, "a plain list" if is_seq else "a plain mapping")
        if is_seq:
            return SequenceNode(default, [], event.start_mark, None, flow_style=event.flow_style)
        return MappingNode(default, [], event.start_mark, None, flow_style=event.flow_style)

    def _refuse_tag(self, event: Any, instead: str) -> None:
        tag = str(event.tag)
        shown = "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag
        self.report.add(
            _line(event),
            f"the YAML tag {shown[:80]!r} is not supported here: write {instead}",
        )

    def _made(self, node: Node, anchor: str | None, size: int | None) -> None:
        self.written += 1
        if size is not None:
            self.size[id(node)] = size
        if anchor is not None:
            self.anchors[anchor] = node

    def _alias(self, event: yaml.AliasEvent) -> Node:
        node = self.anchors.get(str(event.anchor))
        if node is None:
            self._stop(event, f"the alias *{str(event.anchor)[:80]} names no anchor before it")
        assert node is not None
        if id(node) in self.open:
            self._stop(event, f"the alias *{str(event.anchor)[:80]} is inside its own anchor")
        self.aliased += self.size[id(node)]
        limit = max(MAX_ALIAS_VALUES, ALIAS_FACTOR * self.written)
        if self.aliased > limit:
            self._stop(
                event,
                f"YAML aliases expand the file by more than {limit:,} values "
                "(an alias bomb?): write the values out",
            )
        return node

    def _stop(self, event: yaml.Event, message: str) -> None:
        self.report.add(_line(event), message)
        raise _Stop


def _line(event: yaml.Event) -> int:
    return int(event.start_mark.line) + 1 if event.start_mark is not None else 1


def _reader_line(text: str, exc: yaml.reader.ReaderError) -> int:
    """The line of a character the reader refused (libyaml counts bytes, PyYAML characters)."""
    position = int(exc.position)
    if _LOADER is not yaml.SafeLoader:
        return text.encode("utf-8", "surrogatepass")[:position].count(b"\n") + 1
    return text.count("\n", 0, position) + 1


def _reader_reason(exc: yaml.reader.ReaderError) -> str:
    if exc.character in (0, "\x00"):
        return "a NUL character is not allowed"
    return f"{exc.reason} (a control character: remove it, or write it escaped in double quotes)"


def _yaml_reason(exc: yaml.MarkedYAMLError) -> str:
    reason = " ".join(p for p in (exc.context, exc.problem) if p)
    if "scanning an alias" in reason or "scanning an anchor" in reason:
        # PyYAML and libyaml word it differently; what to do is the same.
        return (
            "a value starting with * or & is read as an alias or an anchor "
            '(quote it, like cron: "*/15 * * * *")'
        )
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
            merged.extend(_merged_entries(key_node, value_node, owner, report))
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


def _merged_entries(key: Node, node: Node, owner: str, report: Report) -> list[Entry]:
    """The entries ``<<: *anchor`` merges; a problem is reported at the ``<<``, not the anchor."""
    sources = node.value if isinstance(node, SequenceNode) else [node]
    result: list[Entry] = []
    for source in sources:
        if isinstance(source, MappingNode):
            result.extend(entries(source, owner, report))
        else:
            report.add(key, f"{owner}: << must merge a mapping (or a list of mappings)")
    return result


def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


def construct(node: Node) -> object:
    """The Python value of a node, as ``yaml.safe_load`` would build it.

    Raises ``ValueError`` for a value YAML cannot build (``2026-13-01``).
    """
    if isinstance(node, ScalarNode) and node.tag == _STR_TAG:  # most values: no constructor
        return node.value
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
