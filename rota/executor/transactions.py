"""Database connections of one executor process: one held connection per loop.

Each loop that writes (claim loop + sweeper, outcome writer, heartbeat) owns a
``LoopConnection``: one connection checked out once and kept, so a
transaction costs no pool checkout and no pre-ping round trip. Any error
inside a transaction or statement drops the connection (invalidated, never
reused); the next use opens a new one, so a database restart costs the loop
one failed tick. Retrying, and the heartbeat's self-fencing, are the loops'
own.

Two ways to use it:

* ``statement()``: ONE data-modifying statement (outcome CTE, lease renewal,
  lock-free claim, sweep). On PostgreSQL the connection runs in autocommit, so
  the statement is its own transaction: atomic, one round trip, no BEGIN or
  COMMIT. Every fence is in the statement itself, so autocommit weakens none.
* ``begin()``: a real transaction of several statements (the limited claim:
  advisory lock, then claim).

On SQLite both are a ``BEGIN IMMEDIATE`` transaction: it takes the database's
single write lock up front. Threads of one process that wait for it inside
SQLite back off by sleeping (1, 2, 5, 10... ms), which wastes most of the time
under load; so the executor's own threads queue on a Python lock first (one
lock per process, shared by its loops) and hand the write lock over at once.
Other processes still wait inside SQLite.

``refused_for_its_values`` tells the two kinds of failed write apart: the
database (or the driver, binding a value) refused what the statement carried
(a value too long for its column, a NUL, a number out of range, a constraint),
or it could not be reached. The loops split a refused batch to isolate the
row at fault and retry an unreachable one whole, later.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine
from sqlalchemy import exc as sa_exc


def refused_for_its_values(exc: BaseException) -> bool:
    """True when a failed write was refused for the values it carried, not for connectivity."""
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return False
        return isinstance(exc, sa_exc.DataError | sa_exc.IntegrityError)
    if isinstance(exc, sa_exc.StatementError):  # a bound value failed to convert
        return True
    # Raised by a driver while encoding a value (UnicodeEncodeError is a ValueError).
    return isinstance(exc, ValueError | TypeError | OverflowError)


class LoopConnection:
    def __init__(self, engine: Engine, sqlite_lock: threading.Lock | None = None) -> None:
        self.engine = engine
        self._pg = engine.dialect.name == "postgresql"
        self._lock = None if self._pg else (sqlite_lock or threading.Lock())
        self._conn: Connection | None = None
        # A loop's connection is used by its own thread, and by tests driving a
        # tick by hand meanwhile: one user at a time.
        self._use = threading.Lock()

    @property
    def is_pg(self) -> bool:
        return self._pg

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self.engine.connect()
            if self._pg:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            self._conn = conn
        return self._conn

    def close(self, timeout: float = 1.0) -> None:
        """Give the connection back; skipped if a stuck statement still holds it."""
        if not self._use.acquire(timeout=timeout):
            return
        try:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
        finally:
            self._use.release()

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.invalidate()
            conn.close()
        except Exception:  # already broken: nothing left to release
            pass

    @contextmanager
    def statement(self) -> Iterator[Connection]:
        """One statement, atomic on its own (PostgreSQL: autocommit)."""
        if not self._pg:
            with self.begin() as conn:
                yield conn
            return
        with self._use:
            conn = self._connection()
            try:
                with conn.begin():  # bookkeeping only: the connection is in autocommit
                    yield conn
            except BaseException:
                self._discard()
                raise

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A transaction (SQLite: BEGIN IMMEDIATE, after this process's other loops)."""
        if self._lock is not None:
            with self._lock, self._use:
                conn = self._connection()
                try:
                    with conn.begin():
                        yield conn
                except BaseException:
                    self._discard()
                    raise
            return
        with self._use:
            conn = self._connection()
            try:
                dbapi = conn.connection.driver_connection
                assert dbapi is not None
                # SQLAlchemy's begin is bookkeeping only in autocommit; psycopg's
                # transaction() sends BEGIN and COMMIT (ROLLBACK on an exception).
                with conn.begin(), dbapi.transaction():
                    yield conn
            except BaseException:
                self._discard()
                raise
