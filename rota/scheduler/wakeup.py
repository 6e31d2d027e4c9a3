"""Sleeping between ticks, and waking early when the schedules change.

On PostgreSQL a dedicated autocommit psycopg connection LISTENs on
``rota_schedules``; ``rota apply``, ``pause``, ``resume`` and ``trigger`` send
a NOTIFY in their transaction, so a sleeping replica wakes as they commit. If
that connection breaks, the replica falls back to polling and reconnects on
the next wait. SQLite has no notifications: replicas poll (the sleep is capped).

Behind a transaction pooler notifications cannot arrive (``rota.core.listening``):
each new LISTEN connection first proves itself with a probe NOTIFY. When the
probe does not come back, the replica says so once (naming ``ROTA_LISTEN_URL``),
closes the connection and from then on sleeps at most ``POLL_SECONDS`` at a
time, so a change is seen within about a second without notifications.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import psycopg
from sqlalchemy import Engine

from rota.core.database import short_error
from rota.core.listening import (
    LISTEN_URL_HINT,
    POLL_SECONDS,
    PROBE_SECONDS,
    Probe,
    engine_channel,
    listen_dsn,
    listen_url_given,
)
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
        self._engine = engine
        self._dsn: str | None = None
        if engine.dialect.name == "postgresql":
            self._dsn = listen_dsn(engine)
        self._conn: psycopg.Connection[Any] | None = None
        self._retry_at = 0.0
        self._probe = Probe()
        self.delivering: bool | None = None  # None until the first probe has answered

    def _listen(self) -> psycopg.Connection[Any] | None:
        if self._dsn is None or self.delivering is False:
            return None
        if self._conn is not None and not self._conn.closed:
            return self._conn
        if time.monotonic() < self._retry_at:
            return None  # polling until the next attempt to listen
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=5)
            try:
                conn.execute(f"LISTEN {engine_channel(self._engine, NOTIFY_CHANNEL)}")
                self._probe.listen_and_send(conn, self._engine)
            except BaseException:
                conn.close()
                raise
        except Exception as exc:  # psycopg's, or the probe's NOTIFY through the engine
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
        conn = self._listen()
        if conn is None and self._dsn is not None:
            seconds = min(seconds, POLL_SECONDS)  # no notifications: look again soon
        deadline = time.monotonic() + max(0.0, seconds)
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            slice_s = min(left, _SLICE_SECONDS)
            if conn is None:
                stop.wait(slice_s)
                continue
            try:
                woken = self._notified(conn, slice_s)
            except psycopg.Error as exc:
                if self._outage is not None:
                    self._outage.failed(exc, "listen")
                else:
                    emit(log, "listen_lost", logging.WARNING, error=short_error(exc))
                self.close()
                conn = None
                continue
            if woken:
                return True
            if self._probe.failed():
                self._not_delivered()
                conn = None
                deadline = min(deadline, time.monotonic() + POLL_SECONDS)
        return False

    def _notified(self, conn: psycopg.Connection[Any], timeout: float) -> bool:
        """Wait up to ``timeout`` for a notification that is not the probe's."""
        woken = False
        for notify in conn.notifies(timeout=timeout, stop_after=1):
            woken = woken or not self._probe.consumes(notify)
        if woken:
            # Several changes committed together need only one tick.
            for notify in conn.notifies(timeout=0.001, stop_after=100):
                self._probe.consumes(notify)
        elif self._probe.arrived and self.delivering is None:
            self.delivering = True
        return woken

    def _not_delivered(self) -> None:
        self.delivering = False
        self.close()
        # A listen URL that cannot deliver is a mistake; the database URL going
        # through a transaction pooler is a setup rota supports, by polling.
        given = listen_url_given(self._engine)
        emit(
            log,
            "notifications_not_delivered",
            logging.WARNING if given else logging.INFO,
            channel=NOTIFY_CHANNEL,
            waited=f"{PROBE_SECONDS:g}s",
            cause="ROTA_LISTEN_URL is a transaction pooler?"
            if given
            else "the database URL goes through a transaction pooler?",
            fallback=f"polling every {POLL_SECONDS:g}s",
            hint=LISTEN_URL_HINT,
        )

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
