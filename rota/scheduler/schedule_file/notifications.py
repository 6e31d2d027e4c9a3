"""The ``notifications:`` section: webhook targets, each checked field by field.

::

    notifications:
      ops-hook:
        url: https://hooks.example.com/rota
        events: [job_failed, deadline_missed]
        secret_env: OPS_HOOK_SECRET
        schedules: [nightly-export]     # optional filters
        job_types: [report.generate]
        pool: notify                    # optional; default: default
        insecure: false                 # true allows plain http to any host
        timeout: 10s                    # of one POST (at most 50s)

``url`` (https, or http to a loopback host), ``events`` and ``secret_env`` are
required. Problems never repeat a URL: its path may be a secret.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from yaml.nodes import MappingNode, Node, SequenceNode

from rota.core.config import DEFAULT_POOL
from rota.core.notifications import (
    DELIVERY_HTTP_TIMEOUT,
    ENV_NAME,
    MAX_HTTP_TIMEOUT,
    MAX_TARGETS,
    URL_MAX,
    NotificationEvent,
    NotificationTarget,
    url_problem,
)
from rota.scheduler.schedule_file import fields
from rota.scheduler.schedule_file.fields import FieldError
from rota.scheduler.schedule_file.yaml_tree import Entry, Report, entries, is_null

MAX_FILTER_ITEMS = 1_000
NAME_MAX = 200
_REQUIRED = ("url", "events", "secret_env")


def _url(node: Node) -> str:
    value = fields.construct(node)
    if not isinstance(value, str):
        raise FieldError("expected a URL like https://hooks.example.com/rota (quote it)")
    if len(value) > URL_MAX:  # before any other check: nothing of it is shown
        raise FieldError(f"is longer than {URL_MAX} characters")
    return value


def _events(node: Node) -> tuple[NotificationEvent, ...]:
    known = [e.value for e in NotificationEvent]
    if not isinstance(node, SequenceNode) or not node.value:
        raise FieldError(f"expected a non-empty list of events, from: {', '.join(known)}")
    found: list[NotificationEvent] = []
    for item in node.value:
        value = fields.construct(item)
        if not isinstance(value, str) or value not in known:
            shown = repr(value)[:60] if isinstance(value, str) else "a non-string"
            hint = fields.did_you_mean(value, known) if isinstance(value, str) else ""
            raise FieldError(f"unknown event {shown}{hint}")
        if NotificationEvent(value) in found:
            raise FieldError(f"{value!r} is listed twice")
        found.append(NotificationEvent(value))
    return tuple(found)


def _secret_env(node: Node) -> str:
    value = fields.text(node, max_chars=None)
    if not ENV_NAME.match(value):
        raise FieldError(
            "expected the name of an environment variable (letters, digits and '_', "
            "at most 200), which holds the secret; never the secret itself"
        )
    return value


def _names(node: Node) -> tuple[str, ...]:
    if not isinstance(node, SequenceNode) or not node.value:
        raise FieldError("expected a non-empty list of names")
    if len(node.value) > MAX_FILTER_ITEMS:
        raise FieldError(f"at most {MAX_FILTER_ITEMS:,} names")
    names = tuple(fields.text(item, max_chars=NAME_MAX) for item in node.value)
    return tuple(dict.fromkeys(names))


_PARSERS: Mapping[str, Any] = {
    "url": _url,
    "events": _events,
    "secret_env": _secret_env,
    "schedules": _names,
    "job_types": _names,
    "pool": fields.pool,
    "insecure": fields.boolean,
    "timeout": lambda n: fields.duration(n, positive=True, maximum=MAX_HTTP_TIMEOUT),
}


def read_notifications(
    section: list[Entry],
    report: Report,
    schedules: Collection[str],
    job_types: Collection[str] | None,
) -> dict[str, NotificationTarget]:
    """The valid targets of the section; each problem is reported at its line.

    A filter must name schedules of the file, and job types of the file when
    it has a ``job_types`` section (``job_types`` None: stored ones may be named).
    """
    if len(section) > MAX_TARGETS:
        report.add(section[MAX_TARGETS].key_node, f"notifications: at most {MAX_TARGETS} targets")
        return {}
    targets: dict[str, NotificationTarget] = {}
    for e in section:
        target = _target(e, report, {"schedules": schedules, "job_types": job_types})
        if target is not None:
            targets[e.key] = target
    return targets


def _target(
    e: Entry, report: Report, known: Mapping[str, Collection[str] | None]
) -> NotificationTarget | None:
    owner = f"notification {e.key[:60]!r}"
    before = len(report.problems)
    if not e.key.strip() or len(e.key) > NAME_MAX or not e.key.isprintable() or "/" in e.key:
        report.add(
            e.key_node,
            f"{owner}: a name is 1 to {NAME_MAX} printable characters, without '/'",
        )
    if not isinstance(e.value, MappingNode):
        report.add(e.value, f"{owner}: expected a mapping with url, events and secret_env")
        return None
    values, nodes = _read_values(e.value, owner, report)
    for key in _REQUIRED:
        if key not in values and not _reported(report, before, owner, key):
            report.add(e.key_node, f"{owner}: needs {key}")
    _check_filters(values, nodes, known, owner, report)
    if "url" in values:
        problem = url_problem(values["url"], insecure=values.get("insecure", False))
        if problem is not None:
            report.add(nodes["url"], f"{owner}, url: {problem}")
    if len(report.problems) > before:
        return None
    return NotificationTarget(
        name=e.key,
        url=values["url"],
        events=values["events"],
        secret_env=values["secret_env"],
        schedules=values.get("schedules"),
        job_types=values.get("job_types"),
        pool=values.get("pool", DEFAULT_POOL),
        insecure=values.get("insecure", False),
        timeout=values.get("timeout", DELIVERY_HTTP_TIMEOUT),
    )


def _reported(report: Report, before: int, owner: str, key: str) -> bool:
    """Whether a problem with ``key``'s value was reported already (no 'needs' after it)."""
    return any(p.message.startswith(f"{owner}, {key}:") for p in report.problems[before:])


def _read_values(
    mapping: MappingNode, owner: str, report: Report
) -> tuple[dict[str, Any], dict[str, Node]]:
    """The parsed fields of one target, and the value node of each."""
    values: dict[str, Any] = {}
    nodes: dict[str, Node] = {}
    for f in entries(mapping, owner, report):
        parser = _PARSERS.get(f.key)
        if parser is None:
            fields.unknown_key(report, owner, f.key, f.key_node, list(_PARSERS))
            continue
        if is_null(f.value) and f.key not in _REQUIRED:
            continue
        try:
            values[f.key] = parser(fields.not_null(f.value))
            nodes[f.key] = f.value
        except FieldError as exc:
            report.add(f.value, f"{owner}, {f.key}: {exc}")
    return values, nodes


def _check_filters(
    values: Mapping[str, Any],
    nodes: Mapping[str, Node],
    known: Mapping[str, Collection[str] | None],
    owner: str,
    report: Report,
) -> None:
    """Each name of a filter must be one the file declares (when it declares them)."""
    for key, names in known.items():
        if names is None:
            continue
        for name in values.get(key) or ():
            if name not in names:
                what = key[:-1].replace("_", " ")
                hint = fields.close_match(name, list(names))
                report.add(nodes[key], f"{owner}, {key}: unknown {what} {name[:60]!r}{hint}")
