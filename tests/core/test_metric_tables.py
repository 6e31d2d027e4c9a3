"""Metric deltas of many label sets at once fit the databases' limits on bound values.

A flush after a scheduler has fired 10,000 schedules, each skipping an
occurrence, holds 10,000 label sets of one counter (and as many in the
in-transaction inbox). Written as one multi-row statement, that is more
values than SQLite (32,766) or PostgreSQL (65,535) binds, and the flush
failed for ever, its deltas put back and growing.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, func, select

from rota.core.metric_deltas import SCHEDULE_SKIPPED, Deltas, delta
from rota.core.queries.metric_tables import add_metric_deltas, append_metric_events
from rota.core.tables import metric_inbox, metric_minutes, metric_totals

LABEL_SETS = 14_000  # 5 values a row: past both limits


def test_a_flush_of_many_label_sets_is_written_whole(engine: Engine) -> None:
    deltas: Deltas = {}
    for i in range(LABEL_SETS):
        delta(SCHEDULE_SKIPPED, (f"schedule-{i}", "misfire"), 1, deltas)
    # One minute for both flushes: the test is about many rows, not about the
    # clock crossing a minute between them.
    minute = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    with engine.begin() as conn:
        add_metric_deltas(conn, deltas, now=minute)
        append_metric_events(conn, deltas)
    with engine.begin() as conn:
        add_metric_deltas(conn, deltas, now=minute)  # the second flush adds to every row
    with engine.connect() as conn:
        for table in (metric_totals, metric_minutes):
            count, total = conn.execute(select(func.count(), func.sum(table.c.n))).one()
            assert (count, total) == (LABEL_SETS, 2 * LABEL_SETS)
        inbox = conn.execute(select(func.count()).select_from(metric_inbox)).scalar_one()
        assert inbox == LABEL_SETS
