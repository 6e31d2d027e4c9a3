"""Database faults: ride out an outage, stop on a database that can never work.

``classify(exc)`` sorts an error into

* ``TRANSIENT``: the server is down or restarting, the connection was refused or
  reset, a lock or serialization conflict, too many connections, a busy SQLite
  file. Retried with backoff; the process keeps running.
* ``PERMANENT``: the database refuses writes for good (a read-only SQLite file,
  a read-only PostgreSQL transaction), rota's tables or schema are missing (not
  migrated), the database does not exist, authentication or permission fails,
  the file is not a database. Retrying cannot help.

``Outage`` is one process's view of the database, shared by its loops. The first
transient failure logs one ``database_unavailable`` line (a connection found
dead once, after a server restart, is retried at once first); the others are only
counted, until a statement succeeds again and one ``database_recovered`` line
says how many failed and for how long. A permanent error logs one
``database_unusable`` line with what to do, and ``check()`` then raises
``DatabaseUnusable`` in the loop that owns the process, which stops it (exit 1).
No line carries SQL text, parameters or a password.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from enum import StrEnum

from sqlalchemy.exc import DBAPIError

from rota.core.database import DatabaseError, scrub
from rota.runtime.events import emit

MAX_ERROR_CHARS = 300


class Fault(StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"


class DatabaseUnusable(DatabaseError):
    """The database can never serve this process as configured; already logged once."""


# SQLSTATEs that no retry can fix (PostgreSQL).
_PERMANENT_SQLSTATES = {
    "25006": "the database refuses writes (read-only transaction)",
    "42P01": "rota's tables are missing: run `rota migrate` (or check --schema)",
    "42703": "rota's tables are from another version: run `rota migrate`",
    "3F000": "rota's schema does not exist: run `rota migrate` (or check --schema)",
    "3D000": "the database does not exist",
    "28000": "the server refuses this user (authorization)",
    "28P01": "password authentication failed",
    "42501": "the database user lacks a permission rota needs",
}
# What libpq says when it refuses a connection for good (no SQLSTATE comes with it).
_PERMANENT_CONNECT = {
    "password authentication failed": "password authentication failed",
    "no password supplied": "the server wants a password and none was given",
    "role ": "the database user does not exist",
    "database ": "the database does not exist",
    "permission denied for database": "the database user may not connect to this database "
    "(CONNECT privilege)",
    "no pg_hba.conf entry": "the server's pg_hba.conf refuses this connection",
    "SSL was required": "the URL requires SSL (sslmode) and the server does not offer it",
}
# SQLite primary result codes (``sqlite_errorcode & 0xff``).
_SQLITE_PERMANENT = {
    3: "the database file's permissions refuse access",  # SQLITE_PERM
    8: "the database is read-only (file permissions, a read-only mount or mode=ro)",
    11: "the database file is corrupt",  # SQLITE_CORRUPT
    23: "the database refuses access (authorization)",  # SQLITE_AUTH
    26: "the file is not a SQLite database",  # SQLITE_NOTADB
}


def is_database_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from the database or its driver (else: a bug of ours)."""
    if isinstance(exc, (DBAPIError, DatabaseError, sqlite3.Error)):
        return True
    return type(exc).__module__.split(".")[0] in ("psycopg", "sqlalchemy")


def classify(exc: BaseException) -> Fault:
    """TRANSIENT (retry with backoff) or PERMANENT (stop, exit 1)."""
    return Fault.PERMANENT if permanent_reason(exc) is not None else Fault.TRANSIENT


def permanent_reason(exc: BaseException) -> str | None:
    """Why no retry can help, for a person; None for a transient error."""
    if isinstance(exc, DatabaseUnusable):
        return str(exc)
    if isinstance(exc, DatabaseError):  # ours, raised while connecting (say, no WAL)
        return str(exc)
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return None
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in _SQLITE_PERMANENT:
            return _SQLITE_PERMANENT[code & 0xFF]
        message = str(orig)
        if message.startswith("no such table") or message.startswith("no such column"):
            return "rota's tables are missing or old: run `rota migrate`"
        return None
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        return _PERMANENT_SQLSTATES.get(sqlstate)
    if type(orig).__module__.startswith("psycopg"):
        message = str(orig)
        for said, reason in _PERMANENT_CONNECT.items():
            if said in message and (said[-1] != " " or "does not exist" in message):
                return reason
    return None


def describe(exc: BaseException, secret_url: str | None = None) -> str:
    """One line of what the database said: no SQL text, no parameters, no password."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    line = text.splitlines()[0] if text else type(orig).__name__
    line = scrub(line, secret_url)
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 1] + "…"
    return line


class Outage:
    """Failures of one process's database statements, logged once per outage."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        secret_url: str | None = None,
        base_seconds: float = 0.25,
        max_seconds: float = 5.0,
        rng: random.Random | None = None,
    ) -> None:
        self._log = log
        self._secret_url = secret_url
        self._base = base_seconds
        self._max = max_seconds
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._failures = 0
        self._since = 0.0
        # Loops whose held connection turned out dead (a server restarted since it
        # was opened): its first failure is retried at once, not an outage yet.
        self._forgiven: set[str] = set()
        self.fatal: DatabaseUnusable | None = None

    @property
    def ongoing(self) -> bool:
        return self._failures > 0

    def failed(self, exc: BaseException, where: str) -> float:
        """Note a failed statement of loop ``where``; returns how long that loop should wait.

        Never raises: a permanent error is logged once and kept in ``fatal`` for
        ``check()``.
        """
        reason = permanent_reason(exc)
        with self._lock:
            if reason is not None:
                if self.fatal is None:
                    self.fatal = DatabaseUnusable(reason)
                    emit(
                        self._log,
                        "database_unusable",
                        logging.ERROR,
                        reason=reason,
                        error=describe(exc, self._secret_url),
                        loop=where,
                    )
                return self._max
            dropped = isinstance(exc, DBAPIError) and exc.connection_invalidated
            if dropped and self._failures == 0 and where not in self._forgiven:
                self._forgiven.add(where)
                return 0.0
            self._failures += 1
            if self._failures == 1:
                self._since = time.monotonic()
                emit(
                    self._log,
                    "database_unavailable",
                    logging.WARNING,
                    error=describe(exc, self._secret_url),
                    loop=where,
                )
            delay = min(self._max, self._base * 2.0 ** min(self._failures - 1, 16))
            return delay * (1.0 + 0.2 * self._rng.random())

    def ok(self) -> None:
        """A statement succeeded: an ongoing outage is over (one line says how it went)."""
        if self._failures == 0:
            if self._forgiven:
                with self._lock:
                    self._forgiven.clear()
            return
        with self._lock:
            if self._failures == 0:
                return
            failures, self._failures = self._failures, 0
            seconds = round(time.monotonic() - self._since, 1)
        emit(self._log, "database_recovered", failures=failures, seconds=seconds)

    def check(self) -> None:
        """Raise ``DatabaseUnusable`` once a permanent error was seen (by any loop)."""
        if self.fatal is not None:
            raise self.fatal
