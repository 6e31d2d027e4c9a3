"""``rota apply``: make the ``schedules`` table match a schedule file, in one transaction.

* added: a new row; its cursor starts at the apply instant, so the first
  occurrence is the first one strictly after it.
* changed: the new definition is stored. When what decides the fire instants
  changed (``ScheduleSpec.rule_hash``: rule, zone, DST policy, exclusions),
  the cursor moves to ``max(now, cursor)`` and ``next_fire_at`` is recomputed:
  the new rule takes effect from its next occurrence and never replays the
  past. Other changes (misfire policy, jitter, payload...) keep the cursor.
* removed: the row is kept, marked removed, and no longer fires; its pending
  jobs are kept. A schedule added again later is revived from ``now``.
* paused rows stay paused: pausing is an operator's action, not the file's.
* metric series: those of a removed schedule, and of a job type the file no
  longer declares nor names, are deleted once none of their jobs remains
  (``forget_series_of_gone``); ``rota prune`` and the executors' retention
  delete a removed schedule's when they prune its last job.

The job types of the file are upserted in the same transaction. A dry run does
all of it and rolls back, so it reports exactly what a real apply would do.
Every changed field of a schedule or job type is reported with its old and new
value (``FieldChange``), nested ones (``dst``, ``backoff``, ``args``) one key
deep, so a reviewer sees ``cron: "0 2 * * *" -> "0 3 * * *"``, not just "cron".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from rota.core.config import ScheduleFile, ScheduleSpec
from rota.core.queries.job_types import load_job_types, upsert_job_types
from rota.core.queries.metric_tables import forget_series_of_gone
from rota.core.queries.notification_targets import replace_notification_targets
from rota.core.queries.schedules import (
    insert_schedule,
    live_schedule_names,
    lock_all_schedules,
    mark_removed_if_present,
    notify_schedules_changed,
    read_clock,
    redefine_schedule,
)
from rota.producer.notify import delivery_job_type
from rota.runtime.events import emit
from rota.scheduler.rules import compile_rule
from rota.scheduler.schedule_file.errors import ConfigError, Problem
from rota.scheduler.schedule_file.loader import load_schedule_file

log = logging.getLogger("rota.scheduler")

_VALUE_SHOWN = 200  # characters of one old or new value in the report


@dataclass(frozen=True)
class FieldChange:
    """One changed field (``dst.ambiguous`` for a nested one); None means absent."""

    field: str
    old: Any
    new: Any

    def render(self) -> str:
        return f"{self.field}: {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    """A value as JSON (quotes, escaped control characters), cut short when long."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= _VALUE_SHOWN else text[: _VALUE_SHOWN - 3] + "..."


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """Every field whose value differs, in ``new``'s order; mappings compared key by key."""
    out: list[FieldChange] = []
    for key in [*new, *(k for k in old if k not in new)]:
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += [FieldChange(f"{key}.{c.field}", c.old, c.new) for c in field_changes(a, b)]
        else:
            out.append(FieldChange(key, a, b))
    return tuple(out)


@dataclass(frozen=True)
class ApplyResult:
    added: tuple[str, ...] = ()
    changed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> fields
    revived: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0
    job_types: Mapping[str, str] = field(default_factory=dict)  # name -> added | changed
    job_types_unchanged: int = 0
    # Stored job types a file with a job_types section no longer declares: kept,
    # since pending jobs of that type still need to know how they run.
    job_types_kept: tuple[str, ...] = ()
    dry_run: bool = False
    # name -> its changed fields, old and new (changed and revived schedules)
    schedule_diffs: Mapping[str, tuple[FieldChange, ...]] = field(default_factory=dict)
    job_type_diffs: Mapping[str, tuple[FieldChange, ...]] = field(default_factory=dict)
    # The apply instant (database clock); what changed and removed schedules
    # were (None: a stored definition this rota cannot read); which are paused.
    clock: datetime | None = None
    before: Mapping[str, ScheduleSpec | None] = field(default_factory=dict)
    paused: frozenset[str] = frozenset()

    # name -> added | changed | removed, and what each target stored now is
    notifications: Mapping[str, str] = field(default_factory=dict)
    notification_lines: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_changes(self) -> bool:
        return bool(
            self.added
            or self.changed
            or self.revived
            or self.removed
            or self.job_types
            or self.notifications
        )

    def render(self) -> str:
        lines: list[str] = []
        lines += [f"+ {name}  (added)" for name in self.added]
        for name in self.revived:
            lines.append(f"+ {name}  (revived)")
            lines += self._diff_lines(self.schedule_diffs.get(name, ()))
        for name, fields in self.changed.items():
            lines.append(f"~ {name}  (changed: {', '.join(fields)})")
            lines += self._diff_lines(self.schedule_diffs.get(name, ()))
        lines += [f"- {name}  (removed: kept, no longer fires)" for name in self.removed]
        for name, what in sorted(self.job_types.items()):
            lines.append(f"  job type {name}: {what}")
            lines += self._diff_lines(self.job_type_diffs.get(name, ()))
        for name, what in sorted(self.notifications.items()):
            shown = self.notification_lines.get(name)
            lines.append(f"  notification {name}: {what}" + (f" ({shown})" if shown else ""))
        summary = (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.revived)} revived, "
            f"{len(self.removed)} removed, {self.unchanged} unchanged; {self._job_type_counts()}"
        )
        if self.dry_run:
            summary += " (dry run: nothing applied)"
        return "\n".join([*lines, summary])

    def _job_type_counts(self) -> str:
        kinds = list(self.job_types.values())
        text = (
            f"job types: {kinds.count('added')} added, {kinds.count('changed')} changed, "
            f"{self.job_types_unchanged} unchanged"
        )
        if self.job_types_kept:
            text += f", {len(self.job_types_kept)} no longer declared (kept)"
        return text

    @staticmethod
    def _diff_lines(changes: tuple[FieldChange, ...]) -> list[str]:
        return [f"      {c.render()}" for c in changes]


def apply_file(
    engine: Engine, path: str | Path, dry_run: bool = False, now: datetime | None = None
) -> ApplyResult:
    """Validate ``path`` (raises ``ConfigError`` and applies nothing) and apply it."""
    return apply_schedule_file(engine, load_schedule_file(path), dry_run=dry_run, now=now)


def apply_schedule_file(
    engine: Engine, sf: ScheduleFile, *, dry_run: bool = False, now: datetime | None = None
) -> ApplyResult:
    """Apply ``sf``: the rules are evaluated first, then one short transaction writes.

    The transaction holds SQLite's write lock (PostgreSQL: the apply lock), so
    no rule is evaluated inside it unless a schedule's cursor moved past the
    apply instant meanwhile, and each evaluation is bounded (the rule engine
    gives up past its horizon or its step budget).
    """
    with engine.begin() as conn:
        clock = read_clock(conn, now)
    first_fires = {name: _next_fire(spec, clock) for name, spec in sf.schedules.items()}
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            result = _apply(conn, sf, clock, first_fires, dry_run=dry_run)
        except BaseException:
            trans.rollback()
            raise
        if dry_run:
            trans.rollback()
        else:
            trans.commit()
    if not dry_run:
        _log(result)
    return result


def _apply(
    conn: Connection,
    sf: ScheduleFile,
    clock: datetime,
    first_fires: Mapping[str, datetime | None],
    *,
    dry_run: bool,
) -> ApplyResult:
    rows = lock_all_schedules(conn)
    stored_types = load_job_types(conn)
    job_type_changes = upsert_job_types(conn, sf.job_types.values())
    job_type_diffs = {
        name: field_changes(stored_types[name].to_json(), sf.job_types[name].to_json())
        for name, what in job_type_changes.items()
        if what == "changed"
    }
    _refuse_unknown_stored_job_types(conn, sf)
    notifications = replace_notification_targets(conn, sf.notifications.values())
    if sf.notifications:  # the deliveries' own job type, stored with its targets
        job_type_changes |= upsert_job_types(conn, [delivery_job_type()])
    added: list[str] = []
    revived: list[str] = []
    changed: dict[str, tuple[str, ...]] = {}
    diffs: dict[str, tuple[FieldChange, ...]] = {}
    before: dict[str, ScheduleSpec | None] = {}
    unchanged = 0
    for name, spec in sorted(sf.schedules.items()):
        row = rows.get(name)
        if row is None:
            insert_schedule(conn, spec, clock, first_fires[name])
            added.append(name)
            continue
        was_removed = bool(row["removed"])
        if row["definition_hash"] == spec.definition_hash() and not was_removed:
            unchanged += 1
            continue
        old = _stored_spec(row["definition"])
        # A stored definition this rota cannot read keeps its cursor: it was set aside.
        move = was_removed or (old is not None and old.rule_hash() != spec.rule_hash())
        cursor = _later(row["cursor_at"], clock)
        if move:
            nxt = first_fires[name] if cursor == clock else _next_fire(spec, cursor)
        else:
            # A set-aside schedule is due again at once: its misfire policy
            # decides what the time it was set aside missed.
            nxt = clock if row["set_aside_reason"] is not None or old is None else None
        redefine_schedule(conn, spec, cursor_at=cursor, next_fire_at=nxt, move_cursor=move)
        diffs[name] = field_changes({} if old is None else old.to_json(), spec.to_json())
        if was_removed:
            revived.append(name)
        else:
            changed[name] = _changed_fields(row["definition"], spec)
            before[name] = old
    removed = sorted(n for n, r in rows.items() if n not in sf.schedules and not r["removed"])
    before.update((name, _stored_spec(rows[name]["definition"])) for name in removed)
    mark_removed_if_present(conn, removed)
    _forget_gone_series(conn, sf)
    result = ApplyResult(
        added=tuple(added),
        changed=changed,
        revived=tuple(revived),
        removed=tuple(removed),
        unchanged=unchanged,
        job_types=job_type_changes,
        job_types_unchanged=len(sf.job_types) - len(job_type_changes),
        job_types_kept=tuple(sorted(set(stored_types) - set(sf.job_types))) if sf.job_types else (),
        dry_run=dry_run,
        schedule_diffs=diffs,
        job_type_diffs=job_type_diffs,
        clock=clock,
        before=before,
        paused=frozenset(n for n, r in rows.items() if r["paused"] and not r["removed"]),
        notifications=notifications,
        notification_lines={n: t.describe() for n, t in sf.notifications.items()},
    )
    if result.has_changes and not dry_run:
        notify_schedules_changed(conn)
    return result


def _forget_gone_series(conn: Connection, sf: ScheduleFile) -> None:
    """Delete the metric series of the schedules and job types the file no longer has,
    once none of their jobs remains. A file that declares no job types at all runs
    on the stored ones: then no job type is gone."""
    forget_series_of_gone(conn, "schedule", live_schedule_names(conn))
    if sf.job_types:
        declared = set(sf.job_types) | {s.job_type for s in sf.schedules.values()}
        forget_series_of_gone(conn, "job_type", declared)


def _refuse_unknown_stored_job_types(conn: Connection, sf: ScheduleFile) -> None:
    """A file without job_types may only name job types an earlier apply stored."""
    if not sf.stored_job_type_lines:
        return
    stored = load_job_types(conn)
    problems = [
        Problem(
            sf.path,
            line,
            f"schedule {name!r}, job_type: unknown job type {sf.schedules[name].job_type!r} "
            "(not stored by an earlier `rota apply`; declare it under job_types)",
        )
        for name, line in sorted(sf.stored_job_type_lines.items(), key=lambda kv: kv[1])
        if sf.schedules[name].job_type not in stored
    ]
    if problems:
        raise ConfigError(problems)


def _next_fire(spec: ScheduleSpec, after: datetime) -> datetime | None:
    occ = compile_rule(spec).next_after(after)
    return None if occ is None else occ.instant


def _later(cursor: datetime | None, clock: datetime) -> datetime:
    return clock if cursor is None or cursor < clock else cursor


def _stored_spec(definition: Any) -> ScheduleSpec | None:
    try:
        return ScheduleSpec.from_json(definition)
    except Exception:  # written by another rota, or around `rota check`
        return None


def _changed_fields(old: Any, new: ScheduleSpec) -> tuple[str, ...]:
    a: dict[str, Any] = old if isinstance(old, dict) else {}
    b: dict[str, Any] = new.to_json()
    return tuple(k for k in b if a.get(k) != b.get(k))


def _log(result: ApplyResult) -> None:
    for name in result.added:
        emit(log, "schedule_applied", schedule=name, change="added")
    for name in result.revived:
        emit(log, "schedule_applied", schedule=name, change="revived")
    for name, fields in result.changed.items():
        emit(log, "schedule_applied", schedule=name, change="changed", fields=",".join(fields))
    for name in result.removed:
        emit(log, "schedule_applied", schedule=name, change="removed")
    for name, what in result.notifications.items():
        emit(log, "notification_applied", target=name, change=what)
