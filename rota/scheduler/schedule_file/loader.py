"""Reading and validating a schedule file into frozen config objects.

``load_schedule_file(path)`` returns a ``ScheduleFile`` or raises ``ConfigError``
carrying every problem found, each ``file:line: message`` with the line of the
offending key or value. A bad file is refused whole.

Decisions where the contract is silent:

* Top-level keys are ``defaults``, ``job_types`` and ``schedules``; keys starting
  with ``x-`` are ignored, a place to define YAML anchors (``<<: *common``
  merge keys work everywhere).
* ``defaults`` may hold any schedule field but the rule itself (``cron``,
  ``rrule``, ``every``). A default ``anchor`` applies to ``every:`` schedules
  only, default ``dst`` and ``exclude_dates`` to calendar schedules only; written
  on a schedule of the wrong kind, they are problems. A schedule's own value
  replaces the default whole (``args`` and ``dst`` are not merged key by key).
* A ``dst`` block may give one of its two keys; the other keeps the rule's
  default (see ``scheduler.rules.policy``).
* A schedule's ``job_type`` must be declared under ``job_types`` in the file.
  A file without a ``job_types`` section may name job types stored by an
  earlier ``rota apply``; ``rota apply`` refuses those it does not find
  (``ScheduleFile.stored_job_type_lines`` says where each is named).
* Schedule names may not contain ``@`` (the occurrence key is ``name@instant``).
* Optional fields written as null (``payload_ref:``) are treated as absent.

Rules are checked by compiling them with ``scheduler.rules.compile_rule``, so
the loader and the scheduler cannot disagree on what a rule means.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from yaml.nodes import MappingNode, Node

from rota.scheduler.rules import RuleError, compile_rule, is_fixed_time
from rota.scheduler.rules.policy import default_dst
from rota.scheduler.schedule_file import fields
from rota.scheduler.schedule_file.errors import ConfigError, Problem
from rota.scheduler.schedule_file.fields import AlreadyReported, FieldError
from rota.scheduler.schedule_file.yaml_tree import Entry, Report, compose, entries, is_null
from rota.shared.config.model import (
    Ambiguous,
    Backoff,
    DstPolicy,
    JobTypeSpec,
    MisfirePolicy,
    Nonexistent,
    OverlapPolicy,
    ScheduleFile,
    ScheduleSpec,
)

Parser = Callable[[Node, Report, str], Any]

TOP_LEVEL_KEYS = ("defaults", "job_types", "schedules")
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
    "every": _simple(lambda n: fields.duration(n, positive=True)),
    "anchor": _simple(fields.instant),
    "timezone": _simple(fields.timezone),
    "misfire": _simple(lambda n: fields.choice(n, MisfirePolicy)),
    "grace": _simple(fields.duration),
    "catch_up_window": _simple(fields.duration),
    "dst": _block(
        "dst",
        {
            "nonexistent": lambda n: fields.choice(n, Nonexistent),
            "ambiguous": lambda n: fields.choice(n, Ambiguous),
        },
    ),
    "jitter": _simple(fields.duration),
    "overlap": _simple(lambda n: fields.choice(n, OverlapPolicy)),
    "payload_ref": _simple(fields.text),
    "args": _simple(fields.json_mapping),
    "exclude_dates": _simple(fields.dates),
}

JOB_TYPE_FIELDS: dict[str, Parser] = {
    "handler": _simple(fields.callable_path),
    "command": _simple(fields.argv),
    "pool": _simple(fields.pool),
    "timeout": _simple(lambda n: fields.duration(n, positive=True)),
    "lease": _simple(lambda n: fields.duration(n, positive=True)),
    "max_attempts": _simple(lambda n: fields.integer(n, minimum=1)),
    "backoff": _block(
        "backoff", {"base": fields.duration, "max": fields.duration, "jitter": fields.fraction}
    ),
    "idempotent": _simple(fields.boolean),
    "reconcile": _simple(fields.callable_path),
    "priority": _simple(fields.integer),
}


@dataclass(frozen=True)
class Given:
    """A field value as written, with where it was written."""

    value: Any
    value_node: Node


def load_schedule_file(path: str | Path) -> ScheduleFile:
    """Read and validate a schedule file; raises ``ConfigError`` listing every problem."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([Problem(name, 1, f"cannot read the file: {reason}")]) from None
    return load_schedule_text(text, name)


def load_schedule_text(text: str, filename: str = "<text>") -> ScheduleFile:
    """Validate schedule file text; ``filename`` is what problems and the result name."""
    report = Report(filename)
    job_types: dict[str, JobTypeSpec] = {}
    schedules: dict[str, ScheduleSpec] = {}
    stored_lines: dict[str, int] = {}
    root = compose(text, report)
    if root is not None:
        sections = _sections(root, report)
        defaults = _defaults(sections.get("defaults", []), report)
        # Without a job_types section, job types stored earlier may be named (apply checks).
        declared = (
            [e.key for e in sections["job_types"]] if "job_types" in sections else None
        )
        for e in sections.get("job_types", []):
            if (job_type := _job_type(e, report)) is not None:
                job_types[e.key] = job_type
        for e in sections.get("schedules", []):
            if (schedule := _schedule(e, defaults, declared, report)) is not None:
                schedules[e.key] = schedule
                if declared is None:
                    stored_lines[e.key] = _job_type_line(e)
    if report.problems:
        raise ConfigError(report.problems)
    return ScheduleFile(
        path=filename,
        job_types=MappingProxyType(job_types),
        schedules=MappingProxyType(schedules),
        stored_job_type_lines=MappingProxyType(stored_lines),
    )


def _job_type_line(e: Entry) -> int:
    """The 1-based line of a schedule's ``job_type`` value (else of its name)."""
    if isinstance(e.value, MappingNode):
        for key_node, value_node in e.value.value:
            if getattr(key_node, "value", None) == "job_type":
                return int(value_node.start_mark.line) + 1
    return int(e.key_node.start_mark.line) + 1


def _sections(root: Node, report: Report) -> dict[str, list[Entry]]:
    if not isinstance(root, MappingNode):
        report.add(root, "expected a mapping with job_types and schedules at the top")
        return {}
    sections: dict[str, list[Entry]] = {}
    for e in entries(root, "the file", report):
        if e.key.startswith("x-"):
            continue
        if e.key not in TOP_LEVEL_KEYS:
            fields.unknown_key(report, "the file", e.key, e.key_node, TOP_LEVEL_KEYS)
        elif is_null(e.value):
            sections[e.key] = []
        elif not isinstance(e.value, MappingNode):
            report.add(e.value, f"{e.key}: expected a mapping")
        else:
            sections[e.key] = entries(e.value, e.key, report)
    return sections


def _read_fields(
    given: list[Entry],
    owner: str,
    parsers: Mapping[str, Parser],
    report: Report,
    *,
    forbidden: Mapping[str, str] | None = None,
) -> tuple[dict[str, Given], dict[str, Node]]:
    """Parsed values of the fields given, and the key node of every known key present."""
    values: dict[str, Given] = {}
    present: dict[str, Node] = {}
    for e in given:
        if forbidden and e.key in forbidden:
            report.add(e.key_node, f"{owner}: {forbidden[e.key]}")
            continue
        parser = parsers.get(e.key)
        if parser is None:
            fields.unknown_key(report, owner, e.key, e.key_node, list(parsers))
            continue
        present[e.key] = e.key_node
        if is_null(e.value) and e.key in OPTIONAL:
            continue
        try:
            value = parser(fields.not_null(e.value), report, owner)
        except FieldError as exc:
            report.add(e.value, f"{owner}, {e.key}: {exc}")
        except AlreadyReported:
            pass
        else:
            values[e.key] = Given(value, e.value)
    return values, present


def _defaults(section: list[Entry], report: Report) -> dict[str, Given]:
    forbidden = {
        k: f"{k} is a rule: it belongs to a schedule, not to defaults" for k in RULE_FIELDS
    }
    values, _ = _read_fields(section, "defaults", SCHEDULE_FIELDS, report, forbidden=forbidden)
    return values


MAX_NAME_LENGTH = 200  # schedules.name, jobs.schedule_name, jobs.job_type are VARCHAR(200)


def _check_name(e: Entry, owner: str, report: Report) -> None:
    if e.key != e.key.strip() or not e.key:
        report.add(e.key_node, f"{owner}: a name must not be empty or start or end with a space")
    elif any(not ch.isprintable() for ch in e.key):
        report.add(e.key_node, f"{owner}: a name must not contain control characters")
    elif len(e.key) > MAX_NAME_LENGTH:
        report.add(e.key_node, f"{owner[:60]}...: a name is at most {MAX_NAME_LENGTH} characters")


def _schedule(
    e: Entry, defaults: Mapping[str, Given], job_types: list[str] | None, report: Report
) -> ScheduleSpec | None:
    owner = f"schedule {e.key!r}"
    before = len(report.problems)
    _check_name(e, owner, report)
    if "@" in e.key:
        report.add(
            e.key_node, f"{owner}: a name must not contain '@' (occurrence keys are name@instant)"
        )
    if not isinstance(e.value, MappingNode):
        report.add(e.value, f"{owner}: expected a mapping with job_type and cron, rrule or every")
        return None
    own, present = _read_fields(entries(e.value, owner, report), owner, SCHEDULE_FIELDS, report)
    rules = [k for k in RULE_FIELDS if k in present]
    if not rules:
        report.add(e.key_node, f"{owner}: needs one of cron, rrule or every")
    for extra in rules[1:]:
        report.add(present[extra], f"{owner}: {rules[0]} and {extra} both given; keep exactly one")
    is_every = rules[:1] == ["every"]
    wrong_kind = CALENDAR_ONLY if is_every else ("anchor",)
    for key in wrong_kind:
        if key in present:
            needs = "a calendar rule (cron or rrule)" if is_every else "every: rules"
            report.add(present[key], f"{owner}: {key} only applies to {needs}")
    merged = {k: g for k, g in (dict(defaults) | own).items() if k not in wrong_kind}
    job_type = merged.get("job_type")
    if job_type is None and "job_type" not in present:
        report.add(e.key_node, f"{owner}: needs a job_type")
    elif job_type is not None and job_types is not None and job_type.value not in job_types:
        hint = fields.did_you_mean(job_type.value, job_types) if job_types else ""
        report.add(
            job_type.value_node,
            f"{owner}, job_type: unknown job type {job_type.value!r}{hint} "
            "(declare it under job_types)",
        )
    if len(rules) != 1 or rules[0] not in merged:
        return None
    # Compiled even when other fields are wrong, so a bad rule is reported too.
    spec = _compiled_schedule(e.key, merged, rules[0], owner, report)
    return spec if len(report.problems) == before else None


def _compiled_schedule(
    name: str, merged: Mapping[str, Given], rule: str, owner: str, report: Report
) -> ScheduleSpec | None:
    """The spec, once its rule compiles (with the DST block completed by the rule's default)."""
    values = {k: g.value for k, g in merged.items() if k not in ("dst", "job_type")}
    job_type = merged["job_type"].value if "job_type" in merged else ""
    spec = ScheduleSpec(name=name, job_type=job_type, **values)
    try:
        if "dst" in merged:
            given = merged["dst"].value
            default = default_dst(is_fixed_time(spec))
            dst = DstPolicy(
                nonexistent=given.get("nonexistent", default.nonexistent),
                ambiguous=given.get("ambiguous", default.ambiguous),
            )
            spec = dataclasses.replace(spec, dst=dst)
        compile_rule(spec)
    except RuleError as exc:
        field = exc.field if exc.field is not None and exc.field in merged else rule
        report.add(merged[field].value_node, f"{owner}, {field}: {exc}")
        return None
    return spec


def _job_type(e: Entry, report: Report) -> JobTypeSpec | None:
    owner = f"job type {e.key!r}"
    before = len(report.problems)
    _check_name(e, owner, report)
    if not isinstance(e.value, MappingNode):
        report.add(e.value, f"{owner}: expected a mapping with handler or command")
        return None
    values, present = _read_fields(entries(e.value, owner, report), owner, JOB_TYPE_FIELDS, report)
    runs = [k for k in ("handler", "command") if k in present]
    if not runs:
        report.add(e.key_node, f"{owner}: needs a handler (module:function) or a command (a list)")
    elif len(runs) == 2:
        report.add(present["command"], f"{owner}: handler and command both given; keep exactly one")
    backoff = Backoff(**values.pop("backoff").value) if "backoff" in values else Backoff()
    if backoff.base > backoff.max:
        report.add(present["backoff"], f"{owner}, backoff: base is longer than max")
    if len(report.problems) > before:
        return None
    return JobTypeSpec(name=e.key, backoff=backoff, **{k: g.value for k, g in values.items()})
