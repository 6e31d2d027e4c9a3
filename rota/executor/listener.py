"""Fast wake-up on PostgreSQL: LISTEN on ``rota_jobs`` from a dedicated connection.

The connection is autocommit and only waits for notifications; each one sets
the executor's wake event, so an idle executor claims within milliseconds of
an insert (a trigger notifies), a release, a sweep back to RETRY_WAIT or a
replay. If the connection drops, it is reopened; polling covers the gap.

Behind a transaction pooler notifications cannot arrive (``rota.core.listening``):
every new LISTEN connection first proves itself with a probe NOTIFY. When the
probe does not come back, the listener says so once (naming ``ROTA_LISTEN_URL``)
and stops; the claim loop's polling finds the work instead, every 0.1 s up to
the poll interval by the size of the fleet (``ClaimLoop.poll_wait``).
"""

from __future__ import annotations

import logging
import threading

import psycopg
from sqlalchemy import Engine

from rota.core.database import short_error
from rota.core.listening import (
    LISTEN_URL_HINT,
    PROBE_SECONDS,
    Probe,
    engine_channel,
    listen_dsn,
    listen_url_given,
)
from rota.core.queries.jobs_notify import CHANNEL
from rota.runtime.events import emit
from rota.runtime.outage import Outage
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.executor")

_WAIT_SECONDS = 0.5
_RECONNECT_SECONDS = 1.0


class Listener(BackgroundLoop):
    def __init__(self, engine: Engine, wake: threading.Event, outage: Outage | None = None) -> None:
        super().__init__("rota-listen", join_seconds=2 * _WAIT_SECONDS + 1)
        self._outage = outage  # a server that is down is logged once, not every second
        self._engine = engine
        self._dsn = listen_dsn(engine)
        self._wake = wake
        self._ready = threading.Event()
        self.delivering: bool | None = None  # None until the first probe has answered

    def start(self, wait_ready: float = 5.0) -> None:
        """Start listening; wait up to ``wait_ready`` seconds for the LISTEN to be in place."""
        super().start()
        self._ready.wait(wait_ready)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._listen():
                    return  # notifications cannot arrive: polling finds the work
            except psycopg.Error as exc:
                self.delivering = None  # not until a new connection's probe answers
                if self._outage is not None:
                    self._outage.failed(exc, "listen")
                else:
                    log.warning(
                        "LISTEN %s connection failed, polling meanwhile: %s",
                        CHANNEL,
                        short_error(exc),
                    )
                self._stop.wait(_RECONNECT_SECONDS)
            except Exception as exc:  # the probe's NOTIFY through the engine failed
                self.delivering = None
                if self._outage is not None:
                    self._outage.failed(exc, "listen")
                self._stop.wait(_RECONNECT_SECONDS)

    def _listen(self) -> bool:
        """Listen until stopped or the connection breaks; False when the probe never came."""
        probe = Probe()
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute(f"LISTEN {engine_channel(self._engine, CHANNEL)}")
            probe.listen_and_send(conn, self._engine)
            self._ready.set()
            if self._outage is not None:
                self._outage.ok()
            self._wake.set()  # anything inserted while we were not listening
            while not self._stop.is_set():
                for notify in conn.notifies(timeout=_WAIT_SECONDS, stop_after=1):
                    if not probe.consumes(notify):
                        self._wake.set()
                if probe.failed():
                    self.delivering = False
                    self._say_not_delivered()
                    return False
                if probe.arrived and self.delivering is None:
                    self.delivering = True
        return True

    def _say_not_delivered(self) -> None:
        # A listen URL that cannot deliver is a mistake; the database URL going
        # through a transaction pooler is a setup rota supports, by polling.
        given = listen_url_given(self._engine)
        emit(
            log,
            "notifications_not_delivered",
            logging.WARNING if given else logging.INFO,
            channel=CHANNEL,
            waited=f"{PROBE_SECONDS:g}s",
            cause="ROTA_LISTEN_URL is a transaction pooler?"
            if given
            else "the database URL goes through a transaction pooler?",
            fallback="polling (every 0.1 s to the poll interval, by the executors live)",
            hint=LISTEN_URL_HINT,
        )
