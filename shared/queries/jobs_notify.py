"""Waking idle executors on PostgreSQL: ``NOTIFY rota_jobs``.

An insert into ``jobs`` notifies through a statement-level trigger (migration
0001). Statements that make an existing job claimable now (a release, a sweep
back to RETRY_WAIT, a replay) call ``notify_claimable`` in their transaction;
the notification is delivered on commit. On SQLite this does nothing: executors
poll there.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

CHANNEL = "rota_jobs"
_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', '')")


def notify_claimable(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY)
