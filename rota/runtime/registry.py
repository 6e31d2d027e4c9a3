"""This process in the worker registry: registered at start, refreshed, removed at exit.

::

    reg = Registration(WorkerKind.EXECUTOR, worker_id, interval_seconds=10.0,
                       pools=("default",), concurrency=8)
    reg.start(engine.begin)        # insert the row (and delete rows silent for a day)
    reg.tick(engine.begin)         # in the loop: one UPDATE when an interval has passed
    reg.stop(engine.begin)         # graceful exit: delete the row

``connect`` is any callable returning a context manager that yields a
connection and commits on exit (``engine.begin``, ``LoopConnection.statement``).

The registry is for people (``rota workers``, the dashboard): it never decides
ownership (leases do). So a failed registry write never stops or slows the
process's real work: it is logged once when the registry becomes unreachable
and once when it is back, and tried again at the next interval.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager

from sqlalchemy import Connection

from rota.core.database import short_error
from rota.core.queries.workers import (
    WorkerInfo,
    deregister_worker,
    refresh_worker,
    register_worker,
    remove_gone_workers,
)
from rota.core.states import WorkerKind
from rota.core.version import __version__
from rota.runtime.events import emit
from rota.runtime.outage import Outage

log = logging.getLogger("rota.registry")

# How often a process refreshes its row (and, for --health-port, how often its
# loops must come round: three missed intervals make it gone / unhealthy).
DEFAULT_INTERVAL_SECONDS = 10.0
# Rows silent for a day are deleted by a live process at most this often.
REMOVE_GONE_EVERY_SECONDS = 3600.0
_HOST_MAX = 255

Connect = Callable[[], AbstractContextManager[Connection]]


class Registration:
    def __init__(
        self,
        kind: WorkerKind,
        worker_id: str,
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        pools: Sequence[str] | None = None,
        concurrency: int | None = None,
        outage: Outage | None = None,
        unavailable: Callable[[], Collection[str]] | None = None,
    ) -> None:
        # An executor's job types whose handler does not import, written with every
        # refresh: a fix (or the process's exit) clears them from GET /metrics.
        self._unavailable = unavailable
        self._outage = outage  # the database's faults, logged once for the whole process
        if not interval_seconds > 0:
            raise ValueError("the registry interval must be positive")
        self.info = WorkerInfo(
            worker_id=worker_id,
            kind=kind,
            host=socket.gethostname()[:_HOST_MAX],
            pid=os.getpid(),
            version=__version__,
            interval_seconds=interval_seconds,
            pools=None if pools is None else tuple(pools),
            concurrency=concurrency,
        )
        self._registered = False
        self._refresh_at = 0.0  # monotonic
        self._remove_gone_at = 0.0
        self._failing = False

    @property
    def interval(self) -> float:
        return self.info.interval_seconds

    def start(self, connect: Connect) -> None:
        """Register now (a failure is logged; ``tick`` tries again)."""
        self._refresh_at = time.monotonic() + self.interval
        self._write(connect, self._register)

    def tick(self, connect: Connect, mono: float | None = None) -> None:
        """Refresh the row if an interval has passed since the last refresh; else nothing."""
        mono = time.monotonic() if mono is None else mono
        if mono < self._refresh_at:
            return
        self._refresh_at = mono + self.interval
        self._write(connect, self._refresh)

    def stop(self, connect: Connect) -> None:
        """Deregister (a graceful exit). A failure leaves the row to turn gone."""
        if not self._registered:
            return
        try:
            with connect() as conn:
                deregister_worker(conn, self.info.worker_id)
        except Exception as exc:  # the row turns gone by itself, then is removed
            log.warning(
                "could not remove worker %s from the registry: %s",
                self.info.worker_id,
                short_error(exc),
            )
            return
        self._registered = False
        emit(log, "worker_deregistered", worker_id=self.info.worker_id, kind=self.info.kind)

    # -- internals -------------------------------------------------------------

    def _reported(self) -> Collection[str] | None:
        if self._unavailable is None:
            return None
        try:
            return self._unavailable()
        except Exception as exc:  # a report for people: never stop the row's refresh
            log.debug("unavailable job types not read: %s", exc)
            return None  # the column keeps what the last refresh wrote

    def _register(self, conn: Connection) -> None:
        register_worker(conn, self.info, unavailable=self._reported())
        if not self._registered:
            self._registered = True
            i = self.info
            emit(
                log,
                "worker_registered",
                worker_id=i.worker_id,
                kind=i.kind,
                interval_seconds=i.interval_seconds,
            )

    def _refresh(self, conn: Connection) -> None:
        refreshed = self._registered and refresh_worker(
            conn, self.info.worker_id, unavailable=self._reported()
        )
        if not refreshed:
            # Never registered (the database was down at start), or the row was
            # removed while this process was cut off for a long time.
            self._registered = False
            self._register(conn)
        mono = time.monotonic()
        if mono >= self._remove_gone_at:
            self._remove_gone_at = mono + REMOVE_GONE_EVERY_SECONDS
            removed = remove_gone_workers(conn)
            if removed:
                emit(log, "gone_workers_removed", count=removed)

    def _write(self, connect: Connect, write: Callable[[Connection], None]) -> None:
        try:
            with connect() as conn:
                write(conn)
        except Exception as exc:  # the registry is for people: never stop real work
            if self._outage is not None:
                self._outage.failed(exc, "registry")  # once per outage, or why it is unusable
                self._failing = True
                return
            if not self._failing:
                self._failing = True
                emit(
                    log,
                    "worker_registry_unreachable",
                    logging.WARNING,
                    worker_id=self.info.worker_id,
                    error=short_error(exc),
                )
            return
        if self._outage is not None:
            self._outage.ok()
        if self._failing:
            self._failing = False
            if self._outage is None:
                emit(log, "worker_registry_restored", worker_id=self.info.worker_id)
