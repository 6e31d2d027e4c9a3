"""Fast wake-up on PostgreSQL: LISTEN on ``rota_jobs`` from a dedicated connection.

The connection is autocommit and only waits for notifications; each one sets
the executor's wake event, so an idle executor claims within milliseconds of
an insert (a trigger notifies), a release, a sweep back to RETRY_WAIT or a
replay. If the connection drops, it is reopened; polling covers the gap.
"""

from __future__ import annotations

import logging
import threading

import psycopg
from sqlalchemy import Engine

from rota.core.database import libpq_dsn, listen_channel, short_error
from rota.core.queries.jobs_notify import CHANNEL
from rota.runtime.outage import Outage
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.executor")

_WAIT_SECONDS = 0.5
_RECONNECT_SECONDS = 1.0


class Listener(BackgroundLoop):
    def __init__(self, engine: Engine, wake: threading.Event, outage: Outage | None = None) -> None:
        super().__init__("rota-listen", join_seconds=2 * _WAIT_SECONDS + 1)
        self._outage = outage  # a server that is down is logged once, not every second
        self._dsn = libpq_dsn(engine)
        self._wake = wake
        self._ready = threading.Event()

    def start(self, wait_ready: float = 5.0) -> None:
        """Start listening; wait up to ``wait_ready`` seconds for the LISTEN to be in place."""
        super().start()
        self._ready.wait(wait_ready)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {listen_channel(conn, CHANNEL)}")
                    self._ready.set()
                    if self._outage is not None:
                        self._outage.ok()
                    self._wake.set()  # anything inserted while we were not listening
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=_WAIT_SECONDS, stop_after=1):
                            self._wake.set()
            except psycopg.Error as exc:
                if self._outage is not None:
                    self._outage.failed(exc, "listen")
                else:
                    log.warning(
                        "LISTEN %s connection failed, polling meanwhile: %s",
                        CHANNEL,
                        short_error(exc),
                    )
                self._stop.wait(_RECONNECT_SECONDS)
