"""Index upkeep in the executor: rebuild the job tables' bloated indexes (PostgreSQL).

Why the queue's indexes bloat as history grows, and how a bloated one is
found and rebuilt, is in ``core.queries.index_upkeep``. Every executor on
PostgreSQL has a ``Reindexer``: a thread of its own, so a rebuild (seconds
for a queue index of a ten-million-job table in memory, more from disk)
never holds up a claim. It checks
``first_check`` seconds after the executor starts, then every ``interval``
seconds, while its executor is idle (its last claim found nothing): a busy
executor tries again a minute later, and after a whole interval of that
checks anyway (a rebuild does not block the queue; a queue never idle is
where bloat costs most). A check takes the upkeep lock
(one rebuilder across every process; the others skip their turn), drops the
invalid copies earlier rebuilds left behind, then rebuilds each bloated
index, one at a time, logging ``index_rebuilt`` with its size before and
after.

A rebuild waits for the transactions that were running when it began; it
gives up after ``LOCK_TIMEOUT_SECONDS`` (its copy is dropped at the next
check), and the check ends there: the next index would wait for the same old
transaction, and a migration queued behind a waiting rebuild holds up the
queue behind it. An index is rebuilt only once its live entries, counted (up
to the number that would make its size fine), agree with the statistics.
``stop()`` cancels the statement under way, by its server process, over a
connection of its own, and waits at most a second: an executor's shutdown
never waits for a rebuild, nor for a network that went silent. Nothing is
tried on a standby or a read-only database. A database user that may not
rebuild (not the table's owner) is told once, at WARNING, and the thread ends:
the queue works the same, only bloat is left to the owner (``REINDEX INDEX
CONCURRENTLY``). Behind a transaction pooler a check has no session of its
own to hold the upkeep lock and its timeouts in (the next statement may run on
another server connection, and the lock would stay on one another client
gets), so the first check sees the pooler, says so once, and the thread ends.
``rota executor --no-index-upkeep`` turns it off.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from rota.core.database import behind_pooler, libpq_dsn
from rota.core.queries.index_upkeep import (
    BLOAT_FACTOR,
    LOCK_NOT_AVAILABLE,
    MIN_BLOATED_PAGES,
    IndexSize,
    backend_pid,
    cancel_backend,
    drop_leftover,
    index_sizes,
    leftover_copies,
    live_entries,
    rebuild_index,
    try_upkeep_lock,
    upkeep_possible,
    upkeep_session,
)
from rota.executor.upkeep import DEFAULT_FIRST_CHECK, DEFAULT_REINDEX_INTERVAL
from rota.runtime.events import emit
from rota.runtime.outage import describe
from rota.runtime.startstop import BackgroundLoop, spawn

log = logging.getLogger("rota.executor")

BUSY_RETRY_SECONDS = 60.0
LOCK_TIMEOUT_SECONDS = 5  # a rebuild (or a catalog read) waits no longer for a lock
CANCEL_SECONDS = 5.0  # stop(): how long cancels are sent while the check runs on
_INSUFFICIENT_PRIVILEGE = "42501"


@dataclass(frozen=True)
class Rebuilt:
    name: str
    pages_before: int
    pages_after: int
    seconds: float


@dataclass(frozen=True)
class CheckResult:
    """What one check did; ``locked_out``: another process holds the upkeep lock;
    ``skipped``: the database may not be rebuilt (a standby, read-only)."""

    locked_out: bool = False
    skipped: bool = False
    dropped: tuple[str, ...] = ()
    rebuilt: tuple[Rebuilt, ...] = ()
    failed: tuple[str, ...] = ()

    def rebuilt_names(self) -> list[str]:
        return [r.name for r in self.rebuilt]


class _GiveUp(Exception):
    """End this check: a lock did not come (an old transaction), or the thread stops."""


class Reindexer(BackgroundLoop):
    def __init__(
        self,
        engine: Engine,
        idle: Callable[[], bool],
        *,
        interval: float = DEFAULT_REINDEX_INTERVAL,
        first_check: float = DEFAULT_FIRST_CHECK,
        busy_retry: float = BUSY_RETRY_SECONDS,
        factor: float = BLOAT_FACTOR,
        min_pages: int = MIN_BLOATED_PAGES,
        secret_url: str | None = None,
    ) -> None:
        super().__init__("rota-reindex", join_seconds=1.0)
        self._engine = engine
        self._idle = idle
        self.interval = interval
        self.first_check = first_check
        self.busy_retry = busy_retry
        self.factor = factor
        self.min_pages = min_pages
        self._secret_url = secret_url
        self._pid: int | None = None  # the server process of the check under way
        self.disabled = False
        self._built: dict[str, int] = {}  # index -> its pages after our last rebuild of it

    def stop(self, timeout: float = 1.0) -> None:
        """End the thread, cancelling the statement of a check under way.

        Waits at most ``timeout``: the cancels go on from a thread of their own
        for ``CANCEL_SECONDS`` while the check runs on, each over a new connection
        (a network that went silent cannot hold up the executor's shutdown).
        """
        self.signal_stop()
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        spawn(lambda: self._cancel_while_running(thread), "rota-reindex-cancel")
        self.join(timeout)

    def _cancel_while_running(self, thread: threading.Thread) -> None:
        url = libpq_dsn(self._engine)
        deadline = time.monotonic() + CANCEL_SECONDS
        while thread.is_alive() and time.monotonic() < deadline:
            pid = self._pid
            if pid is not None:
                # The server away: the check ends with its connection, or with the process.
                with contextlib.suppress(Exception):
                    cancel_backend(url, pid, connect_timeout=deadline - time.monotonic())
            thread.join(0.2)

    def _run(self) -> None:
        wait = self.first_check
        overdue = 0.0  # seconds a due check has waited for an idle moment
        while not self._stop.wait(wait):
            if not self._idle() and overdue < self.interval:
                wait = min(self.busy_retry, self.interval)
                overdue += wait
                continue
            overdue = 0.0
            try:
                self.check_once()
            except Exception as exc:  # the database is away, say: the next check retries
                if self._stop.is_set():
                    return
                emit(
                    log,
                    "index_check_failed",
                    logging.WARNING,
                    error=describe(exc, self._secret_url),
                )
            if self.disabled:
                return
            wait = self.interval

    def check_once(self) -> CheckResult:
        """One check: under the upkeep lock, drop leftover copies, rebuild bloated indexes."""
        with self._engine.connect() as raw:
            if behind_pooler(raw.connection.driver_connection):
                self.disabled = True
                emit(log, "index_upkeep_off", reason="behind a transaction pooler")
                return CheckResult(skipped=True)
            conn = raw.execution_options(isolation_level="AUTOCOMMIT")
            try:
                self._pid = backend_pid(conn)
                if self._stop.is_set():
                    return CheckResult()
                upkeep_session(conn, LOCK_TIMEOUT_SECONDS)
                if not upkeep_possible(conn):
                    return CheckResult(skipped=True)
                if not try_upkeep_lock(conn):
                    return CheckResult(locked_out=True)
                return self._check_locked(conn)
            finally:
                self._pid = None
                # The session ends here, with its lock and its settings: the connection
                # never goes back to the pool (a cancel meant for one statement may
                # have hit a later one).
                raw.invalidate()

    def _check_locked(self, conn: Connection) -> CheckResult:
        dropped: list[str] = []
        rebuilt: list[Rebuilt] = []
        failed: list[str] = []
        try:
            for copy in leftover_copies(conn):
                if self._stop.is_set() or self.disabled:
                    break
                if self._statement(conn, copy, drop_leftover, "index_leftover_drop_failed"):
                    dropped.append(copy.name)
                    emit(log, "index_leftover_dropped", index=copy.name, pages=copy.pages)
                else:
                    failed.append(copy.name)
            for index in index_sizes(conn):
                if self._stop.is_set() or self.disabled:
                    break
                built = self._built.get(index.name, 0)
                if not index.bloated(self.factor, self.min_pages, built):
                    continue
                # The statistics say so: count the live entries (up to the number
                # that would make this size fine) before a rebuild.
                live = live_entries(conn, index, index.entries_cap(self.factor))
                if not index.bloated(self.factor, self.min_pages, built, live_entries=live):
                    continue
                started = time.monotonic()
                if not self._statement(conn, index, rebuild_index, "index_rebuild_failed"):
                    failed.append(index.name)
                    continue
                after = next((s.pages for s in index_sizes(conn) if s.name == index.name), 0)
                done = Rebuilt(index.name, index.pages, after, round(time.monotonic() - started, 1))
                rebuilt.append(done)
                self._built[index.name] = after
                emit(
                    log,
                    "index_rebuilt",
                    index=index.name,
                    pages_before=done.pages_before,
                    pages_after=done.pages_after,
                    live_entries=live,
                    seconds=done.seconds,
                )
        except _GiveUp as given_up:
            failed.extend(given_up.args)  # the index whose lock did not come, if any
        return CheckResult(dropped=tuple(dropped), rebuilt=tuple(rebuilt), failed=tuple(failed))

    def _statement(
        self,
        conn: Connection,
        index: IndexSize,
        run: Callable[[Connection, IndexSize], None],
        failure_event: str,
    ) -> bool:
        """Run one long statement; False (logged) if it failed, ``_GiveUp`` to end the check."""
        if self._stop.is_set():
            raise _GiveUp
        try:
            run(conn, index)
            return True
        except DBAPIError as exc:
            sqlstate = getattr(exc.orig, "sqlstate", None)
            if sqlstate == _INSUFFICIENT_PRIVILEGE:
                self.disabled = True
                emit(
                    log,
                    "index_upkeep_unavailable",
                    logging.WARNING,
                    reason="this database user may not rebuild rota's indexes (it does not "
                    "own the tables); bloated indexes are left to their owner "
                    "(REINDEX INDEX CONCURRENTLY)",
                    error=describe(exc, self._secret_url),
                )
                return False
            if self._stop.is_set():
                emit(log, "index_rebuild_stopped", index=index.name)
                raise _GiveUp from exc
            emit(
                log,
                failure_event,
                logging.WARNING,
                index=index.name,
                error=describe(exc, self._secret_url),
            )
            if exc.connection_invalidated:
                raise
            if sqlstate == LOCK_NOT_AVAILABLE:
                # An old transaction holds it up; the next index would wait for it too.
                raise _GiveUp(index.name) from exc
            return False
