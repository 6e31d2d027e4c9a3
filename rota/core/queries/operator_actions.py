"""Statements on ``operator_actions``: the record of operators' cancels, replays, pauses.

Rows are appended in the transaction of the transition they record (the
caller's), only for the jobs or the schedule the transition actually changed,
so the record never claims an action that did not happen. ``at`` is the
database clock (or the injected ``now``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, RowMapping, String, Text, func, literal, select

from rota.core.operator_notes import ActionNote, OperatorAction
from rota.core.sqltime import now_or_db
from rota.core.tables import jobs, operator_actions


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
) -> None:
    conn.execute(
        operator_actions.insert().values(
            schedule_name=name,
            action=action.value,
            actor=note.actor,
            reason=note.reason,
            at=now_or_db(now),
        )
    )


def actions_of_job(conn: Connection, job_id: uuid.UUID) -> Sequence[RowMapping]:
    """Every operator action on one job, oldest first (via ix_operator_actions_job)."""
    return (
        conn.execute(
            select(operator_actions)
            .where(operator_actions.c.job_id == job_id)
            .order_by(operator_actions.c.action_id)
        )
        .mappings()
        .all()
    )


def latest_schedule_actions(conn: Connection) -> dict[str, RowMapping]:
    """{schedule: its most recent operator action} (one row per schedule that has any)."""
    newest = (
        select(func.max(operator_actions.c.action_id))
        .where(operator_actions.c.schedule_name.is_not(None))
        .group_by(operator_actions.c.schedule_name)
    )
    rows = (
        conn.execute(select(operator_actions).where(operator_actions.c.action_id.in_(newest)))
        .mappings()
        .all()
    )
    return {r["schedule_name"]: r for r in rows}
