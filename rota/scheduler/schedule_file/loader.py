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
* ``defaults`` may also hold ``retain``, the default of every job type's
  ``retain`` block; a job type's own ``retain`` keys override it key by key
  (``retain: {failed: 90d}`` keeps the other states' defaults).
* A schedule's ``job_type`` must be declared under ``job_types`` in the file.
  A file without a ``job_types`` section may name job types stored by an
  earlier ``rota apply``; ``rota apply`` refuses those it does not find
  (``ScheduleFile.stored_job_type_lines`` says where each is named).
* Schedule names may not contain ``@`` (the occurrence key is ``name@instant``),
  and may not be ``.`` or ``..``: the API and the dashboard put a name in a URL
  path segment, percent-encoded, which leaves these two as they are, and HTTP
  clients resolve them as dot segments (``/schedules/..`` is ``/``).
* Optional fields written as null (``payload_ref:``) are treated as absent.

Rules are checked by compiling them with ``scheduler.rules.compile_rule``, so
the loader and the scheduler cannot disagree on what a rule means.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from yaml.nodes import MappingNode, Node

from rota.core.config import (
    Backoff,
    DstPolicy,
    JobTypeSpec,
    Retention,
    ScheduleFile,
    ScheduleSpec,
)
from rota.core.notifications import RESERVED_JOB_TYPE_PREFIX, NotificationTarget
from rota.scheduler.rules import RuleError, is_fixed_time, verify_rule
from rota.scheduler.rules.policy import default_dst
from rota.scheduler.schedule_file import fields
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.fields import AlreadyReported, FieldError
from rota.scheduler.schedule_file.file_text import read_schedule_text
from rota.scheduler.schedule_file.keys import (
    CALENDAR_ONLY,
    JOB_TYPE_FIELDS,
    OPTIONAL,
    RETAIN,
    RULE_FIELDS,
    SCHEDULE_FIELDS,
    TOP_LEVEL_KEYS,
    Parser,
)
from rota.scheduler.schedule_file.notifications import read_notifications
from rota.scheduler.schedule_file.yaml_tree import Entry, Report, compose, entries, is_null


@dataclass(frozen=True)
class Given:
    """A field value as written, with where it was written."""

    value: Any
    value_node: Node


def load_schedule_file(path: str | Path, now: datetime | None = None) -> ScheduleFile:
    """Read and validate a schedule file; raises ``ConfigError`` listing every problem.

    ``now`` (default: the machine's clock) is when rules are proven to fire.
    """
    name = str(path)
    return load_schedule_text(read_schedule_text(path), name, now)


def load_schedule_text(
    text: str, filename: str = "<text>", now: datetime | None = None
) -> ScheduleFile:
    """Validate schedule file text; ``filename`` is what problems and the result name."""
    report = Report(filename)
    rules = RuleCheck(now if now is not None else datetime.now(UTC))
    job_types: dict[str, JobTypeSpec] = {}
    schedules: dict[str, ScheduleSpec] = {}
    stored_lines: dict[str, int] = {}
    type_lines: dict[str, Mapping[str, int]] = {}
    targets: dict[str, NotificationTarget] = {}
    root = compose(text, report)
    if root is not None:
        sections = _sections(root, report)
        defaults = _defaults(sections.get("defaults", []), report)
        retain_default = defaults.pop("retain", None)
        # Without a job_types section, job types stored earlier may be named (apply checks).
        declared = [e.key for e in sections["job_types"]] if "job_types" in sections else None
        for e in sections.get("job_types", []):
            if (job_type := _job_type(e, report, retain_default)) is not None:
                job_types[e.key] = job_type
                type_lines[e.key] = _value_lines(e, ("handler", "reconcile"))
        for e in sections.get("schedules", []):
            if (schedule := _schedule(e, defaults, declared, report, rules)) is not None:
                schedules[e.key] = schedule
                if declared is None:
                    stored_lines[e.key] = _job_type_line(e)
        names = [e.key for e in sections.get("schedules", [])]
        targets = read_notifications(sections.get("notifications", []), report, names, declared)
    if report.problems:
        raise ConfigError(report.problems)
    return ScheduleFile(
        path=filename,
        job_types=MappingProxyType(job_types),
        schedules=MappingProxyType(schedules),
        stored_job_type_lines=MappingProxyType(stored_lines),
        job_type_lines=MappingProxyType(type_lines),
        notifications=MappingProxyType(targets),
    )


def _value_lines(e: Entry, keys: tuple[str, ...]) -> Mapping[str, int]:
    """The 1-based lines of the values of ``keys`` in ``e`` (and of its name, as "name")."""
    lines = {"name": int(e.key_node.start_mark.line) + 1}
    if isinstance(e.value, MappingNode):
        for key_node, value_node in e.value.value:
            key = getattr(key_node, "value", None)
            if key in keys:
                lines[str(key)] = int(value_node.start_mark.line) + 1
    return MappingProxyType(lines)


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
    parsers = {**SCHEDULE_FIELDS, "retain": RETAIN}  # retain: a default of job types
    values, _ = _read_fields(section, "defaults", parsers, report, forbidden=forbidden)
    return values


MAX_NAME_LENGTH = 200  # schedules.name, jobs.schedule_name, jobs.job_type are VARCHAR(200)
DOT_SEGMENTS = (".", "..")  # percent-encoding leaves them as they are in a URL path


def _check_name(e: Entry, owner: str, report: Report) -> None:
    if e.key != e.key.strip() or not e.key:
        report.add(e.key_node, f"{owner}: a name must not be empty or start or end with a space")
    elif any(not ch.isprintable() for ch in e.key):
        report.add(e.key_node, f"{owner}: a name must not contain control characters")
    elif len(e.key) > MAX_NAME_LENGTH:
        report.add(e.key_node, f"{owner[:60]}...: a name is at most {MAX_NAME_LENGTH} characters")


def _schedule(
    e: Entry,
    defaults: Mapping[str, Given],
    job_types: list[str] | None,
    report: Report,
    rules: RuleCheck,
) -> ScheduleSpec | None:
    owner = f"schedule {e.key!r}"
    before = len(report.problems)
    _check_name(e, owner, report)
    if "@" in e.key:
        report.add(
            e.key_node, f"{owner}: a name must not contain '@' (occurrence keys are name@instant)"
        )
    if e.key in DOT_SEGMENTS:
        report.add(
            e.key_node,
            f"{owner}: a name must not be '.' or '..' (a URL path cannot carry it: "
            "/schedules/.. is /)",
        )
    if not isinstance(e.value, MappingNode):
        report.add(e.value, f"{owner}: expected a mapping with job_type and cron, rrule or every")
        return None
    own, present = _read_fields(entries(e.value, owner, report), owner, SCHEDULE_FIELDS, report)
    kinds = [k for k in RULE_FIELDS if k in present]
    if not kinds:
        report.add(e.key_node, f"{owner}: needs one of cron, rrule or every")
    for extra in kinds[1:]:
        report.add(present[extra], f"{owner}: {kinds[0]} and {extra} both given; keep exactly one")
    is_every = kinds[:1] == ["every"]
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
    if len(kinds) != 1 or kinds[0] not in merged:
        return None
    # Compiled even when other fields are wrong, so a bad rule is reported too.
    spec = _compiled_schedule(e.key, merged, kinds[0], owner, report, rules)
    return spec if len(report.problems) == before else None


class RuleCheck:
    """``verify_rule`` at one instant, once per distinct rule of a file."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._done: dict[tuple[Any, ...], RuleError | None] = {}

    def verify(self, spec: ScheduleSpec) -> None:
        # What decides the instants (as ScheduleSpec.rule_hash, without its JSON).
        key = (
            spec.cron, spec.rrule, spec.every, spec.anchor, spec.timezone, spec.dst,
            spec.exclude_dates,
        )  # fmt: skip
        if key not in self._done:
            try:
                verify_rule(spec, self.now)
                self._done[key] = None
            except RuleError as exc:
                self._done[key] = exc
        error = self._done[key]
        if error is not None:
            raise error


def _compiled_schedule(
    name: str, merged: Mapping[str, Given], rule: str, owner: str, report: Report, rules: RuleCheck
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
        rules.verify(spec)
    except (RuleError, OverflowError) as exc:
        field = getattr(exc, "field", None)
        field = field if field is not None and field in merged else rule
        if isinstance(exc, OverflowError):  # an anchor or DTSTART near year 1 or 9999
            exc = RuleError(f"its instants fall outside the years 1 to 9999 ({exc})")
        report.add(merged[field].value_node, f"{owner}, {field}: {exc}")
        return None
    return spec


def _job_type(e: Entry, report: Report, retain_default: Given | None) -> JobTypeSpec | None:
    owner = f"job type {e.key!r}"
    before = len(report.problems)
    _check_name(e, owner, report)
    if e.key.startswith(RESERVED_JOB_TYPE_PREFIX):
        report.add(
            e.key_node,
            f"{owner[:60]}: names starting with {RESERVED_JOB_TYPE_PREFIX!r} are rota's own",
        )
    if not isinstance(e.value, MappingNode):
        report.add(e.value, f"{owner}: expected a mapping with handler or command")
        return None
    values, present = _read_fields(entries(e.value, owner, report), owner, JOB_TYPE_FIELDS, report)
    runs = [k for k in ("handler", "command") if k in present]
    if not runs:
        report.add(e.key_node, f"{owner}: needs a handler (module:function) or a command (a list)")
    elif len(runs) == 2:
        report.add(present["command"], f"{owner}: handler and command both given; keep exactly one")
    elif runs == ["command"] and "isolation" in present:
        report.add(
            present["isolation"],
            f"{owner}, isolation: is for Python handlers; a command always runs in a process "
            "of its own",
        )
    backoff = Backoff(**values.pop("backoff").value) if "backoff" in values else Backoff()
    retain = values.pop("retain").value if "retain" in values else {}
    defaults = retain_default.value if retain_default is not None else {}
    values["retain"] = Given(Retention(**{**defaults, **retain}), e.value)
    if backoff.base > backoff.max:
        report.add(present["backoff"], f"{owner}, backoff: base is longer than max")
    limited = "max_queued" in values or "max_queue_age" in values
    if "shed_below_priority" in values and not limited:
        report.add(
            present["shed_below_priority"],
            f"{owner}, shed_below_priority: needs max_queued or max_queue_age "
            "(shedding starts at half of a limit)",
        )
    if len(report.problems) > before:
        return None
    return JobTypeSpec(name=e.key, backoff=backoff, **{k: g.value for k, g in values.items()})
