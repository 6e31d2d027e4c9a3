"""Waking idle executors on PostgreSQL: ``NOTIFY rota_jobs``.

An insert into ``jobs`` notifies through a statement-level trigger (migrations
0001 and 0004). Statements that make an existing job claimable now (a release,
a sweep back to RETRY_WAIT, a replay) call ``notify_claimable`` in their
transaction; the notification is delivered on commit. The channel carries the
schema rota lives in (``rota_jobs`` in ``public``, ``rota_jobs_<schema>``
elsewhere), so two installations in one database never wake each other. On
SQLite this does nothing: executors watch the database's change counter there.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from rota.core.database import channel_sql

CHANNEL = "rota_jobs"
_NOTIFY = text(f"SELECT pg_notify({channel_sql(CHANNEL)}, '')")


def notify_claimable(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY)
