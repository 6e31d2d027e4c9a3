"""Field values of the schedule file: each parser turns one YAML node into a value.

A parser raises ``FieldError`` with a message saying what is wrong (the loader
adds the file, the line and whose field it is). Parsers of nested blocks
(``dst``, ``backoff``) report each inner problem at its own line and then raise
``AlreadyReported``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

from yaml.nodes import MappingNode, Node, SequenceNode

from rota.core.config import MAX_COMMAND_ITEMS, MAX_EXCLUDE_DATES, RETAIN_FOREVER
from rota.core.durations import (
    MAX_DURATION,
    DurationError,
    DurationTooLong,
    format_duration,
    parse_duration,
)
from rota.core.storable import check_args, check_text
from rota.core.timefmt import parse_instant
from rota.scheduler.rules.occurrence import RuleError
from rota.scheduler.rules.zones import load_zone
from rota.scheduler.schedule_file import yaml_tree
from rota.scheduler.schedule_file.yaml_tree import Report, entries, is_null

E = TypeVar("E", bound=StrEnum)

_CALLABLE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_POOL_NAME = re.compile(r"^[\w.-]+$")


MAX_TEXT_LENGTH = 10_000  # payload_ref, handler paths, rule texts
MAX_ARGUMENT_LENGTH = 100_000  # one command-line argument (Linux allows 128 KiB)


class FieldError(ValueError):
    """A field value that is wrong; the message says how."""


class AlreadyReported(Exception):
    """A nested block whose problems were already reported one by one."""


def construct(node: Node) -> object:
    try:
        return yaml_tree.construct(node)
    except ValueError as exc:
        raise FieldError(str(exc)) from None


def close_match(word: str, choices: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` when one of ``choices`` is close to ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """The close match, or the list of choices when nothing is close."""
    return close_match(word, choices) or f" (expected one of: {', '.join(choices)})"


def unknown_key(report: Report, owner: str, key: str, key_node: Node, known: Sequence[str]) -> None:
    report.add(key_node, f"{owner}: unknown key {key!r}{did_you_mean(key, known)}")


def text(node: Node, *, max_chars: int | None = MAX_TEXT_LENGTH) -> str:
    value = construct(node)
    if not isinstance(value, str):
        raise FieldError(f"expected a string, got {_shown(value)} (quote it)")
    if not value.strip():
        raise FieldError("must not be empty")
    return storable(value, max_chars)


def storable(value: str, max_chars: int | None) -> str:
    """``value`` if a database can store it: no NUL, no lone surrogate, not too long."""
    try:
        checked = check_text("the value", value, max_chars)
    except ValueError as exc:
        raise FieldError(str(exc).removeprefix("the value ")) from None
    assert checked is not None
    return checked


def boolean(node: Node) -> bool:
    value = construct(node)
    if not isinstance(value, bool):
        raise FieldError(f"expected true or false, got {_shown(value)}")
    return value


def integer(node: Node, *, minimum: int, maximum: int) -> int:
    value = construct(node)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"expected a whole number, got {_shown(value)}")
    if not minimum <= value <= maximum:
        shown = str(value) if len(str(value)) <= 30 else f"{str(value)[:20]}..."
        raise FieldError(f"must be between {minimum:,} and {maximum:,}, got {shown}")
    return value


def fraction(node: Node) -> float:
    """A number from 0 to 1 (``backoff.jitter``: the share of the delay added on top)."""
    value = construct(node)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(
            f"expected a number from 0 to 1 (0.2 adds up to 20 % of the delay), got {_shown(value)}"
        )
    if not 0 <= value <= 1:  # NaN fails this too
        raise FieldError(f"must be between 0 and 1 (a fraction of the delay), got {value}")
    return float(value)


def duration(
    node: Node,
    *,
    positive: bool = False,
    minimum: timedelta | None = None,
    maximum: timedelta = MAX_DURATION,
) -> timedelta:
    try:
        value = parse_duration(construct(node))
    except DurationTooLong:
        raise FieldError(f"must be at most {format_duration(maximum)}") from None
    except DurationError as exc:
        raise FieldError(str(exc)) from None
    if positive and value <= timedelta(0):
        raise FieldError("must be longer than 0s")
    if minimum is not None and value < minimum:
        raise FieldError(f"must be at least {format_duration(minimum)}")
    if value > maximum:
        raise FieldError(f"must be at most {format_duration(maximum)}")
    return value


def retention(node: Node) -> timedelta | None:
    """How long finished jobs are kept: a positive duration, or ``forever`` (None)."""
    if construct(node) == RETAIN_FOREVER:
        return None
    try:
        return duration(node, positive=True)
    except FieldError as exc:
        raise FieldError(f"{exc} (or {RETAIN_FOREVER})") from None


def choice(node: Node, enum: type[E]) -> E:
    value = construct(node)
    names = [member.value for member in enum]
    if not isinstance(value, str) or value not in names:
        if not isinstance(value, str):
            raise FieldError(f"expected one of {' | '.join(names)}, got {_shown(value)}")
        raise FieldError(f"{value!r} is not one of {' | '.join(names)}{close_match(value, names)}")
    return enum(value)


def timezone(node: Node) -> str:
    name = text(node)
    try:
        load_zone(name)
    except RuleError as exc:
        raise FieldError(str(exc)) from None
    return name


def instant(node: Node) -> datetime:
    """An ISO-8601 instant; a missing offset means UTC (as everywhere in rota)."""
    value = construct(node)
    if isinstance(value, datetime):
        return parse_instant(value.isoformat())
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError as exc:
            raise FieldError(str(exc)) from None
    raise FieldError(f"expected an instant like 2026-01-01T00:00:00Z, got {_shown(value)}")


def dates(node: Node) -> tuple[date, ...]:
    if not isinstance(node, SequenceNode):
        raise FieldError("expected a list of dates, like [2026-12-24, 2026-12-31]")
    if len(node.value) > MAX_EXCLUDE_DATES:
        raise FieldError(f"at most {MAX_EXCLUDE_DATES:,} dates")
    result = []
    for item in node.value:
        value = construct(item)
        if isinstance(value, str):
            try:
                value = date.fromisoformat(value.strip())
            except ValueError:
                raise FieldError(f"{value!r} is not a date like 2026-12-31") from None
        if isinstance(value, datetime) or not isinstance(value, date):
            raise FieldError(f"{_shown(value)} is not a date like 2026-12-31")
        result.append(value)
    return tuple(result)


def json_mapping(node: Node) -> dict[str, Any]:
    """A mapping that survives a JSON round trip unchanged: string keys, JSON values."""
    if not isinstance(node, MappingNode):
        raise FieldError("expected a mapping, like {region: eu}")
    value = construct(node)
    if not isinstance(value, dict):
        raise FieldError("expected a mapping, like {region: eu}")
    problem = _json_problem(value)
    if problem:
        raise FieldError(f"must be JSON: {problem}")
    try:
        checked = check_args(value)  # the same limits as `rota enqueue --args`
    except ValueError as exc:
        raise FieldError(str(exc).removeprefix("args ")) from None
    assert checked is not None
    return checked


def _json_problem(value: object) -> str | None:
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"key {k!r} is not a string (quote it)"
            if problem := _json_problem(v):
                return problem
        return None
    if isinstance(value, list):
        return next((p for v in value if (p := _json_problem(v))), None)
    if value is None or isinstance(value, str | int | float | bool):
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            return f"{value!r} is not a JSON number"
        return None
    return f"{_shown(value)} is not a JSON value (quote it)"


def callable_path(node: Node) -> str:
    value = text(node)
    if not _CALLABLE_PATH.match(value):
        raise FieldError(f"{value!r} is not an import path like myapp.reports:generate")
    return value


def argv(node: Node) -> tuple[str, ...]:
    if not isinstance(node, SequenceNode) or not node.value:
        raise FieldError('expected a non-empty list of strings, like ["/usr/bin/env", "sh"]')
    if len(node.value) > MAX_COMMAND_ITEMS:
        raise FieldError(f"at most {MAX_COMMAND_ITEMS:,} items")
    items = [construct(item) for item in node.value]
    for i, item in enumerate(items, 1):
        if not isinstance(item, str):
            raise FieldError(f"{_shown(item)} is not a string (quote it)")
        try:
            storable(item, MAX_ARGUMENT_LENGTH)
        except FieldError as exc:
            # A NUL would cut the argument short at exec; say which one.
            raise FieldError(f"item {i} {exc}") from None
    if not items[0]:
        raise FieldError("the program (first item) must not be empty")
    return tuple(str(item) for item in items)


MAX_POOL_LENGTH = 100  # jobs.pool and job_types.pool are VARCHAR(100)


def pool(node: Node) -> str:
    value = text(node)
    if not _POOL_NAME.match(value):
        raise FieldError(f"{value!r}: use letters, digits, '_', '-' and '.' only")
    if len(value) > MAX_POOL_LENGTH:
        raise FieldError(f"a pool name is at most {MAX_POOL_LENGTH} characters")
    return value


def block(
    node: Node, report: Report, owner: str, name: str, parsers: dict[str, Any]
) -> dict[str, Any]:
    """A nested mapping whose keys each have a parser; inner problems at their own lines."""
    if not isinstance(node, MappingNode):
        raise FieldError(f"expected a mapping with {', '.join(parsers)}")
    values: dict[str, Any] = {}
    failed = False
    for e in entries(node, f"{owner}, {name}", report):
        parser = parsers.get(e.key)
        if parser is None:
            unknown_key(report, f"{owner}, {name}", e.key, e.key_node, list(parsers))
            failed = True
            continue
        try:
            values[e.key] = parser(not_null(e.value))
        except FieldError as exc:
            report.add(e.value, f"{owner}, {name}.{e.key}: {exc}")
            failed = True
    if failed:
        raise AlreadyReported
    return values


def not_null(node: Node) -> Node:
    if is_null(node):
        raise FieldError("needs a value")
    return node


def _shown(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"{type(value).__name__} {value!r}"
