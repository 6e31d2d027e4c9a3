"""Statements on ``schedule_skips``: the ledger of occurrences that got no job of their own.

One row per range: ``reason`` (misfire, dst, overlap, paused, coalesced), the
first and last nominal instant, how many occurrences, and for a coalesced range
the job that covers it. Rows are written in the transaction that advances the
schedule's cursor past them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, RowMapping, func, select

from rota.core.metric_deltas import SCHEDULE_SKIPPED, Deltas, delta
from rota.core.queries.metric_tables import append_metric_events
from rota.core.sqltime import db_now
from rota.core.states import SkipReason
from rota.core.tables import schedule_skips

REASONS = tuple(SkipReason)


@dataclass(frozen=True)
class SkipRecord:
    schedule_name: str
    reason: SkipReason
    first_instant: datetime
    last_instant: datetime
    count: int
    job_id: uuid.UUID | None = None


def record_skips(conn: Connection, records: Sequence[SkipRecord]) -> None:
    """Append ledger rows (one multi-row INSERT), and count them in the metrics.

    ``rota_schedule_skipped_total`` is appended to in the same transaction
    (``metric_inbox``, which locks nothing shared), so the counter and the
    ledger cannot disagree (coalesced ranges are counted under their reason too).
    """
    if not records:
        return
    deltas: Deltas = {}
    for r in records:
        delta(SCHEDULE_SKIPPED, (r.schedule_name, SkipReason(r.reason).value), r.count, deltas)
    append_metric_events(conn, deltas)
    conn.execute(
        schedule_skips.insert().values(
            [
                {
                    "schedule_name": r.schedule_name,
                    "reason": r.reason,
                    "first_instant": r.first_instant,
                    "last_instant": r.last_instant,
                    "count": r.count,
                    "job_id": r.job_id,
                    "recorded_at": db_now(),
                }
                for r in records
            ]
        )
    )


def totals_by_reason(conn: Connection) -> dict[str, dict[str, int]]:
    """{schedule: {reason: occurrences}} over the whole ledger."""
    rows = conn.execute(
        select(
            schedule_skips.c.schedule_name,
            schedule_skips.c.reason,
            func.sum(schedule_skips.c.count),
        ).group_by(schedule_skips.c.schedule_name, schedule_skips.c.reason)
    ).all()
    out: dict[str, dict[str, int]] = {}
    for name, reason, total in rows:
        out.setdefault(name, {})[reason] = int(total)
    return out


def latest_by_reason(conn: Connection) -> dict[str, dict[str, RowMapping]]:
    """{schedule: {reason: the most recent ledger row}}."""
    ranked = select(
        schedule_skips,
        func.row_number()
        .over(
            partition_by=(schedule_skips.c.schedule_name, schedule_skips.c.reason),
            order_by=schedule_skips.c.skip_id.desc(),
        )
        .label("rank"),
    ).subquery()
    rows = conn.execute(select(ranked).where(ranked.c.rank == 1)).mappings().all()
    out: dict[str, dict[str, RowMapping]] = {}
    for r in rows:
        out.setdefault(r["schedule_name"], {})[r["reason"]] = r
    return out


def skips_of_schedule(
    conn: Connection, name: str, *, newest: int | None = None
) -> Sequence[RowMapping]:
    """The ledger of one schedule, oldest first (``newest``: only the last N rows)."""
    if newest is not None:
        recent = (
            select(schedule_skips)
            .where(schedule_skips.c.schedule_name == name)
            .order_by(schedule_skips.c.skip_id.desc())
            .limit(newest)
        ).subquery()
        return conn.execute(select(recent).order_by(recent.c.skip_id)).mappings().all()
    return (
        conn.execute(
            select(schedule_skips)
            .where(schedule_skips.c.schedule_name == name)
            .order_by(schedule_skips.c.skip_id)
        )
        .mappings()
        .all()
    )
