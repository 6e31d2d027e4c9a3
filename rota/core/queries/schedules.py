"""Statements on ``schedules``.

Every statement is named for its guard. The scheduler locks due rows with
``lock_due_schedules`` (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; on SQLite the
``BEGIN IMMEDIATE`` write lock serialises replicas) and advances them with
``advance_cursors_if_unchanged`` in the same transaction that inserts the
occurrences' jobs, so an occurrence and the cursor that covers it commit together.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Connection,
    RowMapping,
    Text,
    Uuid,
    bindparam,
    func,
    select,
    text,
    update,
)

from rota.core.config import ScheduleSpec
from rota.core.database import channel_sql
from rota.core.sqltime import UTCDateTime, db_now, now_or_db
from rota.core.tables import schedules

NOTIFY_CHANNEL = "rota_schedules"  # + "_<schema>" outside public (rota.core.database.channel)
_NOTIFY_SCHEDULES = text(f"SELECT pg_notify({channel_sql(NOTIFY_CHANNEL)}, '')")


class DueSchedule(NamedTuple):
    """A due schedule row, locked by this transaction."""

    name: str
    definition_hash: str
    cursor_at: datetime | None
    next_fire_at: datetime
    set_aside_reason: str | None = None
    coalesce_from: datetime | None = None  # a coalesced range being counted
    coalesce_count: int = 0


class CursorAdvance(NamedTuple):
    """How one locked schedule moves: its new high-water mark and next instant.

    ``set_aside_reason`` and the coalescing fields are written as given (None
    and 0 clear them): every advance says the whole state.
    """

    name: str
    expected_next_fire_at: datetime
    cursor_at: datetime
    next_fire_at: datetime | None
    last_fire_at: datetime | None = None  # None: unchanged
    last_job_id: uuid.UUID | None = None  # None: unchanged
    skipped_add: int = 0
    coalesced_add: int = 0
    set_aside_reason: str | None = None
    coalesce_from: datetime | None = None
    coalesce_count: int = 0


class CursorMoved(RuntimeError):
    """A locked schedule row no longer matched what this transaction read."""


def read_clock(conn: Connection, now: datetime | None = None) -> datetime:
    """The database clock (or the injected ``now``), as an aware UTC instant."""
    value = conn.execute(select(now_or_db(now))).scalar_one()
    assert isinstance(value, datetime)
    return value


def lock_due_schedules(
    conn: Connection,
    now: datetime | None,
    limit: int,
    names: Sequence[str] | None = None,
) -> tuple[list[DueSchedule], datetime | None]:
    """Lock up to ``limit`` active schedules whose ``next_fire_at`` has come.

    Returns the rows, oldest ``next_fire_at`` first, and the clock the statement
    used (None when nothing was due). Rows locked by another replica are skipped.
    The definitions are not read here: most are already compiled by their hash.
    """
    clock = now_or_db(now)
    stmt = (
        select(
            schedules.c.name,
            schedules.c.definition_hash,
            schedules.c.cursor_at,
            schedules.c.next_fire_at,
            schedules.c.set_aside_reason,
            schedules.c.coalesce_from,
            schedules.c.coalesce_count,
            clock.label("clock"),
        )
        .where(
            ~schedules.c.paused,
            ~schedules.c.removed,
            schedules.c.next_fire_at.is_not(None),
            schedules.c.next_fire_at <= clock,
        )
        .order_by(schedules.c.next_fire_at)
        .limit(limit)
        .with_for_update(skip_locked=True, of=schedules)
    )
    if names is not None:
        stmt = stmt.where(schedules.c.name.in_(names))
    rows = conn.execute(stmt).all()
    if not rows:
        return [], None
    due = [DueSchedule(*row[:7]) for row in rows]
    return due, rows[0][7]


def load_definitions(conn: Connection, names: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The stored definitions of ``names`` (read only for hashes a replica has not seen)."""
    if not names:
        return {}
    rows = conn.execute(
        select(schedules.c.name, schedules.c.definition).where(schedules.c.name.in_(names))
    ).all()
    return {name: definition for name, definition in rows}


def advance_cursors_if_unchanged(conn: Connection, advances: Sequence[CursorAdvance]) -> None:
    """Advance each schedule whose ``next_fire_at`` is still what was read; all or nothing.

    Raises ``CursorMoved`` (the caller rolls back) when any row did not match:
    that would mean another writer moved a row this transaction holds locked.
    """
    if not advances:
        return
    if conn.dialect.name == "postgresql":
        matched = _advance_pg(conn, advances)
    else:
        matched = _advance_executemany(conn, advances)
    if matched != len(advances):
        raise CursorMoved(f"{len(advances) - matched} schedule cursor(s) moved under a lock")


def _advance_params(a: CursorAdvance) -> dict[str, Any]:
    return {
        "v_name": a.name,
        "v_expected": a.expected_next_fire_at,
        "v_cursor": a.cursor_at,
        "v_next": a.next_fire_at,
        "v_last_fire": a.last_fire_at,
        "v_last_job": a.last_job_id,
        "v_skipped": a.skipped_add,
        "v_coalesced": a.coalesced_add,
        "v_reason": a.set_aside_reason,
        "v_coalesce_from": a.coalesce_from,
        "v_coalesce_count": a.coalesce_count,
    }


# Driver SQL: each CursorAdvance field goes as one binary array (psycopg's
# %(name)b, dumped in C), in CursorAdvance's field order.
_PG_ADVANCE = """
    UPDATE schedules AS s
    SET cursor_at = v.cursor_at,
        next_fire_at = v.next_fire_at,
        last_fire_at = coalesce(v.last_fire_at, s.last_fire_at),
        last_job_id = coalesce(v.last_job_id, s.last_job_id),
        skipped_count = s.skipped_count + v.skipped_add,
        coalesced_count = s.coalesced_count + v.coalesced_add,
        set_aside_reason = v.set_aside_reason,
        coalesce_from = v.coalesce_from,
        coalesce_count = v.coalesce_count,
        updated_at = now()
    FROM unnest(CAST(%(name)b AS text[]), CAST(%(expected)b AS timestamptz[]),
                CAST(%(cursor_at)b AS timestamptz[]), CAST(%(next_fire_at)b AS timestamptz[]),
                CAST(%(last_fire_at)b AS timestamptz[]), CAST(%(last_job_id)b AS uuid[]),
                CAST(%(skipped_add)b AS bigint[]), CAST(%(coalesced_add)b AS bigint[]),
                CAST(%(set_aside_reason)b AS text[]), CAST(%(coalesce_from)b AS timestamptz[]),
                CAST(%(coalesce_count)b AS bigint[]))
      AS v(name, expected, cursor_at, next_fire_at, last_fire_at, last_job_id,
           skipped_add, coalesced_add, set_aside_reason, coalesce_from, coalesce_count)
    WHERE s.name = v.name AND s.next_fire_at = v.expected
      AND s.name = ANY(CAST(%(name)b AS text[]))
    """
_PG_ADVANCE_PARAMS = (
    "name",
    "expected",
    "cursor_at",
    "next_fire_at",
    "last_fire_at",
    "last_job_id",
    "skipped_add",
    "coalesced_add",
    "set_aside_reason",
    "coalesce_from",
    "coalesce_count",
)


def _advance_pg(conn: Connection, advances: Sequence[CursorAdvance]) -> int:
    # One statement whatever the batch size; the columns are the transposed
    # tuples. Every instant is aware (read from timestamptz or computed from one).
    params = dict(zip(_PG_ADVANCE_PARAMS, map(list, zip(*advances, strict=True)), strict=True))
    return int(conn.exec_driver_sql(_PG_ADVANCE, params).rowcount)


def _advance_executemany(conn: Connection, advances: Sequence[CursorAdvance]) -> int:
    stmt = (
        update(schedules)
        .where(
            schedules.c.name == bindparam("v_name"),
            schedules.c.next_fire_at == bindparam("v_expected", type_=UTCDateTime()),
        )
        .values(
            cursor_at=bindparam("v_cursor", type_=UTCDateTime()),
            next_fire_at=bindparam("v_next", type_=UTCDateTime()),
            last_fire_at=func.coalesce(
                bindparam("v_last_fire", type_=UTCDateTime()), schedules.c.last_fire_at
            ),
            last_job_id=func.coalesce(
                bindparam("v_last_job", type_=Uuid()), schedules.c.last_job_id
            ),
            skipped_count=schedules.c.skipped_count + bindparam("v_skipped", type_=BigInteger),
            coalesced_count=schedules.c.coalesced_count
            + bindparam("v_coalesced", type_=BigInteger),
            set_aside_reason=bindparam("v_reason", type_=Text),
            coalesce_from=bindparam("v_coalesce_from", type_=UTCDateTime()),
            coalesce_count=bindparam("v_coalesce_count", type_=BigInteger),
            updated_at=db_now(),
        )
    )
    return int(conn.execute(stmt, [_advance_params(a) for a in advances]).rowcount)


def earliest_next_fire(conn: Connection) -> tuple[datetime | None, datetime]:
    """The soonest ``next_fire_at`` of an active schedule (via ix_schedules_due), and now."""
    row = conn.execute(
        select(
            select(func.min(schedules.c.next_fire_at))
            .where(
                ~schedules.c.paused,
                ~schedules.c.removed,
                schedules.c.next_fire_at.is_not(None),
            )
            .scalar_subquery()
            .label("soonest"),
            db_now().label("clock"),
        )
    ).one()
    soonest = row.soonest
    if isinstance(soonest, str):  # SQLite: min() loses the column type
        soonest = UTCDateTime().process_result_value(soonest, conn.dialect)
    return soonest, row.clock


# -- apply ------------------------------------------------------------------


# pg_advisory_xact_lock key of `rota apply`: two applies at once run one after the other.
_APPLY_LOCK_KEY = 0x726F7461  # "rota"


def lock_all_schedules(conn: Connection) -> dict[str, RowMapping]:
    """Every schedule row, locked for the apply transaction, by name.

    On PostgreSQL a transaction-scoped advisory lock first serialises concurrent
    applies (row locks cannot cover rows that do not exist yet); on SQLite the
    ``BEGIN IMMEDIATE`` write lock already does.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(_APPLY_LOCK_KEY)))
    rows = conn.execute(select(schedules).with_for_update()).mappings().all()
    return {r["name"]: r for r in rows}


def insert_schedule(
    conn: Connection, spec: ScheduleSpec, cursor_at: datetime, next_fire_at: datetime | None
) -> None:
    """A new schedule; with a deadline, its occurrences after ``cursor_at`` are judged."""
    watermark = cursor_at if spec.deadline is not None else None
    conn.execute(
        schedules.insert().values(
            name=spec.name,
            job_type=spec.job_type,
            definition=spec.to_json(),
            definition_hash=spec.definition_hash(),
            cursor_at=cursor_at,
            next_fire_at=next_fire_at,
            created_at=db_now(),
            updated_at=db_now(),
            deadlines_checked_through=watermark,
            deadline_check_at=watermark,
        )
    )


def redefine_schedule(
    conn: Connection,
    spec: ScheduleSpec,
    *,
    cursor_at: datetime | None,
    next_fire_at: datetime | None,
    move_cursor: bool,
) -> None:
    """Store a new definition (and revive the row); with ``move_cursor``, a new cursor.

    A schedule set aside by the scheduler gets another chance: its reason is
    cleared (with ``next_fire_at`` given, it is due from then).
    """
    vals: dict[str, Any] = {
        "job_type": spec.job_type,
        "definition": spec.to_json(),
        "definition_hash": spec.definition_hash(),
        "removed": False,
        "set_aside_reason": None,
        "updated_at": db_now(),
    }
    if move_cursor:
        vals["cursor_at"] = cursor_at
    if move_cursor or next_fire_at is not None:
        vals["next_fire_at"] = next_fire_at
    vals.update(_deadline_watermark(spec, cursor_at))
    conn.execute(update(schedules).where(schedules.c.name == spec.name).values(**vals))


def _deadline_watermark(spec: ScheduleSpec, cursor_at: datetime | None) -> dict[str, Any]:
    """A redefined schedule's deadline columns (``rota.scheduler.deadlines``).

    Without a deadline both are cleared. With one, a watermark already kept
    stays (nothing judged is judged again), a new one starts at the cursor
    (occurrences from now on are judged, not the past), and the next check
    is due at once: the checker computes when it is really due under the new
    definition.
    """
    if spec.deadline is None:
        return {"deadlines_checked_through": None, "deadline_check_at": None}
    start: Any = (
        db_now()
        if cursor_at is None
        else bindparam("v_deadline_start", cursor_at, type_=UTCDateTime())
    )
    return {
        "deadlines_checked_through": func.coalesce(schedules.c.deadlines_checked_through, start),
        "deadline_check_at": start,
    }


def mark_removed_if_present(conn: Connection, names: Iterable[str]) -> None:
    """Removed rows are kept (history, pending jobs) but never fire again."""
    names = list(names)
    if not names:
        return
    conn.execute(
        update(schedules)
        .where(schedules.c.name.in_(names), ~schedules.c.removed)
        .values(removed=True, next_fire_at=None, updated_at=db_now())
    )


def notify_schedules_changed(conn: Connection) -> None:
    """Wake the replicas (PostgreSQL NOTIFY, delivered at commit); SQLite replicas poll."""
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY_SCHEDULES)


# -- reads --------------------------------------------------------------------


def list_schedules(conn: Connection) -> Sequence[RowMapping]:
    return conn.execute(select(schedules).order_by(schedules.c.name)).mappings().all()


def get_schedule(conn: Connection, name: str, *, lock: bool = False) -> RowMapping | None:
    stmt = select(schedules).where(schedules.c.name == name)
    if lock:
        stmt = stmt.with_for_update()
    return conn.execute(stmt).mappings().first()


def live_schedule_names(conn: Connection) -> list[str]:
    """The schedules of the applied configuration: every one not marked removed."""
    stmt = select(schedules.c.name).where(~schedules.c.removed).order_by(schedules.c.name)
    return list(conn.execute(stmt).scalars())


def schedule_names(conn: Connection) -> list[str]:
    return list(conn.execute(select(schedules.c.name).order_by(schedules.c.name)).scalars())


# -- pause / resume -----------------------------------------------------------


def pause_if_active(conn: Connection, name: str, now: datetime | None = None) -> bool:
    """Pause a schedule that is not paused; False when it already was."""
    result = conn.execute(
        update(schedules)
        .where(schedules.c.name == name, ~schedules.c.paused)
        .values(paused=True, paused_at=now_or_db(now), updated_at=db_now())
    )
    return bool(result.rowcount)


def resume_if_paused(conn: Connection, name: str) -> bool:
    """Unpause a paused schedule; False when it was not paused."""
    result = conn.execute(
        update(schedules)
        .where(schedules.c.name == name, schedules.c.paused)
        .values(paused=False, updated_at=db_now())
    )
    return bool(result.rowcount)


def record_manual_fire(conn: Connection, name: str, job_id: uuid.UUID, at: datetime) -> None:
    """A manual run (``rota trigger``) shows as the last fire; the cursor does not move."""
    conn.execute(
        update(schedules)
        .where(schedules.c.name == name)
        .values(last_fire_at=at, last_job_id=job_id, updated_at=db_now())
    )
