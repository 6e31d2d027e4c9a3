"""Statements on ``operator_actions``: the audit trail of every operator action.

Rows are appended in the transaction of the change they record (the
caller's), only for the jobs or the schedule the change actually touched, so
the record never claims an action that did not happen. An action that runs
in many transactions (a prune, a backfill) writes its one row in the first
of them, so one stopped half-way is still on record. ``at`` is the database
clock (or the injected ``now``).

The audit reads newest first by ``(at, action_id)``: the rows of one bulk
batch share their instant, and the id orders them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    RowMapping,
    String,
    Text,
    func,
    literal,
    select,
    tuple_,
)

from rota.core.operator_notes import ActionNote, OperatorAction, target_of
from rota.core.sqltime import now_or_db
from rota.core.tables import jobs, operator_actions

# The actions that decide whether a schedule runs: the "last action" shown with it.
_SCHEDULE_STATE_ACTIONS = (OperatorAction.PAUSE.value, OperatorAction.RESUME.value)


def record_job_actions(
    conn: Connection,
    action: OperatorAction,
    job_ids: Sequence[uuid.UUID],
    note: ActionNote,
    now: datetime | None = None,
) -> None:
    """One row per job: one ``INSERT ... SELECT`` over the ids (compiled once, any count)."""
    if not job_ids:
        return
    chosen = select(
        jobs.c.job_id,
        literal(action.value, String()),
        literal(note.actor, String()),
        literal(note.reason, Text()),
        now_or_db(now),
    ).where(jobs.c.job_id.in_(job_ids))
    columns = ["job_id", "action", "actor", "reason", "at"]
    conn.execute(operator_actions.insert().from_select(columns, chosen))


def record_schedule_action(
    conn: Connection,
    action: OperatorAction,
    name: str,
    note: ActionNote,
    now: datetime | None = None,
    *,
    detail: str | None = None,
) -> None:
    conn.execute(
        operator_actions.insert().values(
            schedule_name=name,
            action=action.value,
            actor=note.actor,
            reason=note.reason,
            detail=detail,
            at=now_or_db(now),
        )
    )


def record_jobs_action(
    conn: Connection,
    action: OperatorAction,
    job_filter: str,
    note: ActionNote,
    now: datetime | None = None,
    *,
    detail: str | None = None,
) -> None:
    """One row for an action on a set of jobs described by ``job_filter`` (a prune)."""
    conn.execute(
        operator_actions.insert().values(
            job_filter=job_filter,
            action=action.value,
            actor=note.actor,
            reason=note.reason,
            detail=detail,
            at=now_or_db(now),
        )
    )


def actions_of_job(
    conn: Connection, job_id: uuid.UUID, *, newest: int | None = None
) -> Sequence[RowMapping]:
    """The operator actions on one job (the ``newest`` last ones), oldest first."""
    return _oldest_first(conn, operator_actions.c.job_id == job_id, newest)


def actions_of_schedule(
    conn: Connection, name: str, *, newest: int | None = None
) -> Sequence[RowMapping]:
    """The operator actions on one schedule (the ``newest`` last ones), oldest first."""
    return _oldest_first(conn, operator_actions.c.schedule_name == name, newest)


def _oldest_first(conn: Connection, where: Any, newest: int | None) -> Sequence[RowMapping]:
    # The newest rows by id through the partial index on the target, then turned round.
    rows = (
        conn.execute(
            select(operator_actions)
            .where(where)
            .order_by(operator_actions.c.action_id.desc())
            .limit(newest)
        )
        .mappings()
        .all()
    )
    return rows[::-1]


def latest_schedule_actions(conn: Connection) -> dict[str, RowMapping]:
    """{schedule: its most recent pause or resume} (one row per schedule that has one).

    Triggers and backfills leave a schedule as it was: the row that says who
    paused it, and why, stays the one shown.
    """
    newest = (
        select(func.max(operator_actions.c.action_id))
        .where(
            operator_actions.c.schedule_name.is_not(None),
            operator_actions.c.action.in_(_SCHEDULE_STATE_ACTIONS),
        )
        .group_by(operator_actions.c.schedule_name)
    )
    rows = (
        conn.execute(select(operator_actions).where(operator_actions.c.action_id.in_(newest)))
        .mappings()
        .all()
    )
    return {r["schedule_name"]: r for r in rows}


@dataclass(frozen=True)
class AuditKeyset:
    """Where a page of the audit ends: its last row. The next starts strictly after it."""

    at: datetime
    action_id: int


def newest_actions(
    conn: Connection,
    *,
    since: datetime | None = None,
    actor: str | None = None,
    after: AuditKeyset | None = None,
    limit: int | None = None,
) -> Sequence[RowMapping]:
    """The audit, newest first by (at, action_id): at or after ``since``, of ``actor``.

    One range of ``ix_operator_actions_at`` (or of ``ix_operator_actions_actor``
    with an actor), bounded by the keyset: a deep page costs what the first does.
    """
    t = operator_actions
    where = []
    if since is not None:
        where.append(t.c.at >= literal(since, t.c.at.type))
    if actor is not None:
        where.append(t.c.actor == actor)
    if after is not None:
        # typed as the columns: a keyset in another time zone is compared in UTC
        where.append(
            tuple_(t.c.at, t.c.action_id)
            < tuple_(literal(after.at, t.c.at.type), literal(after.action_id, BigInteger()))
        )
    stmt = select(t).where(*where).order_by(t.c.at.desc(), t.c.action_id.desc()).limit(limit)
    return conn.execute(stmt).mappings().all()


def audit_entry(row: Mapping[Any, Any]) -> dict[str, Any]:
    """One row as the audit shows it: at (a datetime), actor, action, target_kind, target,
    reason, detail."""
    kind, target = target_of(row["job_id"], row["schedule_name"], row["job_filter"])
    return {
        "at": row["at"],
        "actor": row["actor"],
        "action": row["action"],
        "target_kind": kind.value,
        "target": target,
        "reason": row["reason"],
        "detail": row["detail"],
    }
