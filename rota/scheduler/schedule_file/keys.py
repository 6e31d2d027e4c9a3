"""The keys a schedule file knows, section by section, each with the parser of its value.

``fields`` parses single values; these tables say which value each key takes
(and its bounds, from ``rota.core.config``). A key missing here is unknown to
the loader, which names the nearest known one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yaml.nodes import Node

from rota.core.config import (
    MAX_ATTEMPTS_MAX,
    MAX_BACKOFF,
    MAX_CATCH_UP_WINDOW,
    MAX_DEADLINE,
    MAX_GRACE,
    MAX_JITTER,
    MAX_LEASE,
    MAX_QUEUED_MAX,
    MAX_TIMEOUT,
    MIN_DEADLINE,
    PRIORITY_MAX,
    PRIORITY_MIN,
    Ambiguous,
    Isolation,
    MisfirePolicy,
    Nonexistent,
    OverlapPolicy,
)
from rota.core.storable import PAYLOAD_REF_MAX
from rota.scheduler.schedule_file import fields
from rota.scheduler.schedule_file.yaml_tree import Report

# A value node, where problems go, and the owner named in them -> the parsed value.
Parser = Callable[[Node, Report, str], Any]

TOP_LEVEL_KEYS = ("defaults", "job_types", "schedules", "notifications")
RULE_FIELDS = ("cron", "rrule", "every")
CALENDAR_ONLY = ("dst", "exclude_dates")
# Written as null, these count as not given.
OPTIONAL = frozenset(
    {
        "payload_ref",
        "args",
        "exclude_dates",
        "anchor",
        "dst",
        "timeout",
        "reconcile",
        "handler",
        "command",
        "max_queued",
        "max_queue_age",
        "shed_below_priority",
    }
)


def _simple(parse: Callable[[Node], Any]) -> Parser:
    return lambda node, _report, _owner: parse(node)


def _block(name: str, parsers: dict[str, Callable[[Node], Any]]) -> Parser:
    return lambda node, report, owner: fields.block(node, report, owner, name, parsers)


SCHEDULE_FIELDS: dict[str, Parser] = {
    "job_type": _simple(fields.text),
    "cron": _simple(fields.text),
    "rrule": _simple(fields.text),
    "every": _simple(lambda n: fields.duration(n, positive=True)),  # at most 100 years
    "anchor": _simple(fields.instant),
    "timezone": _simple(fields.timezone),
    "misfire": _simple(lambda n: fields.choice(n, MisfirePolicy)),
    "grace": _simple(lambda n: fields.duration(n, maximum=MAX_GRACE)),
    "catch_up_window": _simple(lambda n: fields.duration(n, maximum=MAX_CATCH_UP_WINDOW)),
    "dst": _block(
        "dst",
        {
            "nonexistent": lambda n: fields.choice(n, Nonexistent),
            "ambiguous": lambda n: fields.choice(n, Ambiguous),
        },
    ),
    "jitter": _simple(lambda n: fields.duration(n, maximum=MAX_JITTER)),
    "overlap": _simple(lambda n: fields.choice(n, OverlapPolicy)),
    "payload_ref": _simple(lambda n: fields.text(n, max_chars=PAYLOAD_REF_MAX)),
    "args": _simple(fields.json_mapping),
    "exclude_dates": _simple(fields.dates),
    "deadline": _simple(lambda n: fields.duration(n, minimum=MIN_DEADLINE, maximum=MAX_DEADLINE)),
}

RETAIN = _block(
    "retain",
    {"succeeded": fields.retention, "cancelled": fields.retention, "failed": fields.retention},
)

JOB_TYPE_FIELDS: dict[str, Parser] = {
    "handler": _simple(fields.callable_path),
    "command": _simple(fields.argv),
    "pool": _simple(fields.pool),
    "timeout": _simple(lambda n: fields.duration(n, positive=True, maximum=MAX_TIMEOUT)),
    "lease": _simple(lambda n: fields.duration(n, positive=True, maximum=MAX_LEASE)),
    "max_attempts": _simple(lambda n: fields.integer(n, minimum=1, maximum=MAX_ATTEMPTS_MAX)),
    "backoff": _block(
        "backoff",
        {
            "base": lambda n: fields.duration(n, maximum=MAX_BACKOFF),
            "max": lambda n: fields.duration(n, maximum=MAX_BACKOFF),
            "jitter": fields.fraction,
        },
    ),
    "idempotent": _simple(fields.boolean),
    "reconcile": _simple(fields.callable_path),
    "priority": _simple(lambda n: fields.integer(n, minimum=PRIORITY_MIN, maximum=PRIORITY_MAX)),
    "max_queued": _simple(lambda n: fields.integer(n, minimum=1, maximum=MAX_QUEUED_MAX)),
    "max_queue_age": _simple(lambda n: fields.duration(n, positive=True, maximum=MAX_TIMEOUT)),
    "shed_below_priority": _simple(
        lambda n: fields.integer(n, minimum=PRIORITY_MIN, maximum=PRIORITY_MAX)
    ),
    "retain": RETAIN,
    "isolation": _simple(lambda n: fields.choice(n, Isolation)),
}
