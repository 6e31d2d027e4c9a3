"""Sleeping between ticks, and waking early when the schedules change.

On PostgreSQL a dedicated autocommit psycopg connection LISTENs on
``rota_schedules``; ``rota apply``, ``pause``, ``resume`` and ``trigger`` send
a NOTIFY in their transaction, so a sleeping replica wakes as they commit. If
that connection breaks, the replica falls back to polling and reconnects on
the next wait. SQLite has no notifications: replicas poll (the sleep is capped).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import psycopg
from sqlalchemy import Engine

from rota.core.database import libpq_dsn, listen_channel, short_error
from rota.core.queries.schedules import NOTIFY_CHANNEL
from rota.runtime.events import emit
from rota.runtime.outage import Outage

log = logging.getLogger("rota.scheduler")

# Sleep in slices so a stop request is seen promptly even without a notification.
_SLICE_SECONDS = 0.25
_RELISTEN_SECONDS = 10.0  # after a failed LISTEN connection, poll this long before retrying


class Wakeup:
    def __init__(self, engine: Engine, outage: Outage | None = None) -> None:
        self._outage = outage  # a server that is down is logged once, not every retry
        self._dsn: str | None = None
        if engine.dialect.name == "postgresql":
            self._dsn = libpq_dsn(engine)
        self._conn: psycopg.Connection[Any] | None = None
        self._retry_at = 0.0

    def _listen(self) -> psycopg.Connection[Any] | None:
        if self._dsn is None:
            return None
        if self._conn is not None and not self._conn.closed:
            return self._conn
        if time.monotonic() < self._retry_at:
            return None  # polling until the next attempt to listen
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=5)
            conn.execute(f"LISTEN {listen_channel(conn, NOTIFY_CHANNEL)}")
        except psycopg.Error as exc:
            self._retry_at = time.monotonic() + _RELISTEN_SECONDS
            if self._outage is not None:
                self._outage.failed(exc, "listen")
            else:
                emit(log, "listen_failed", logging.WARNING, error=short_error(exc))
            return None
        self._conn = conn
        return conn

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Sleep up to ``seconds``; True when woken by a notification."""
        deadline = time.monotonic() + max(0.0, seconds)
        conn = self._listen()
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            slice_s = min(left, _SLICE_SECONDS)
            if conn is None:
                stop.wait(slice_s)
                continue
            try:
                if list(conn.notifies(timeout=slice_s, stop_after=1)):
                    # Several changes committed together need only one tick.
                    list(conn.notifies(timeout=0.001, stop_after=100))
                    return True
            except psycopg.Error as exc:
                if self._outage is not None:
                    self._outage.failed(exc, "listen")
                else:
                    emit(log, "listen_lost", logging.WARNING, error=short_error(exc))
                self.close()
                conn = None
        return False

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
