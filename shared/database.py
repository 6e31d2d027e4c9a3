"""Engines and transactions on PostgreSQL and SQLite.

PostgreSQL is the production backend. SQLite is the embedded default and must
serve several processes on one host, so every SQLite connection runs in WAL
mode with a busy timeout, and every transaction starts with ``BEGIN IMMEDIATE``:
the write lock is taken up front, so two processes never both read and then
both fail to upgrade to a writer ("database is locked"). A SQLite setup that
cannot be made safe (an in-memory database, a filesystem without WAL) is
refused with a clear message instead of degrading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import NullPool

DEFAULT_URL = "sqlite:///rota.db"
SQLITE_BUSY_TIMEOUT_MS = 60_000
_MIGRATIONS_TABLE = "alembic_version"


class DatabaseError(Exception):
    """A database problem a person can fix; the message says how."""


class SchemaNotReady(DatabaseError):
    pass


@dataclass(frozen=True)
class DatabaseSettings:
    url: str

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


def resolve_url(cli_value: str | None, environ: dict[str, str] | None = None) -> str:
    """``--db`` wins over ``ROTA_DATABASE_URL``, which wins over ``sqlite:///rota.db``."""
    env = os.environ if environ is None else environ
    url = cli_value or env.get("ROTA_DATABASE_URL") or DEFAULT_URL
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str, *, pool_size: int = 5) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseError(
            f"bad database URL {url!r}: use sqlite:///path/to/rota.db or "
            "postgresql+psycopg://user@host:5432/dbname"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, parsed.database)
    if parsed.get_backend_name() == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            raise DatabaseError(
                f"unsupported PostgreSQL driver {parsed.get_driver_name()!r}: "
                "use postgresql+psycopg://"
            )
        return create_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            connect_args={"application_name": "rota"},
        )
    raise DatabaseError(
        f"unsupported database {parsed.get_backend_name()!r}: rota runs on PostgreSQL or SQLite"
    )


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if not database or database == ":memory:" or "mode=memory" in url:
        raise DatabaseError(
            "an in-memory SQLite database cannot be shared between rota's processes: "
            "name a file, like sqlite:///rota.db"
        )
    directory = os.path.dirname(os.path.abspath(database))
    if not os.path.isdir(directory):
        raise DatabaseError(f"the directory of the SQLite database does not exist: {directory}")
    engine = create_engine(
        url,
        poolclass=NullPool if os.environ.get("ROTA_SQLITE_NULLPOOL") else None,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        try:
            mode = cur.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise DatabaseError(
                    f"SQLite database {database} cannot use WAL mode (got {mode!r}); several "
                    "processes cannot share it safely. Put it on a local filesystem."
                )
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def head_revision() -> str:
    from migrations.runner import head_revision as _head

    return _head()


def current_revision(engine: Engine) -> str | None:
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(_MIGRATIONS_TABLE):
                return None
            row = conn.execute(text(f"SELECT version_num FROM {_MIGRATIONS_TABLE}")).first()
            conn.rollback()
    except OperationalError as exc:
        raise DatabaseError(f"cannot reach the database: {_short(exc)}") from None
    return None if row is None else str(row[0])


def ensure_migrated(engine: Engine) -> None:
    """Refuse to go on when the schema is missing or older than this rota."""
    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        raise SchemaNotReady(f"the database {where} has no rota schema: run `rota migrate` first")
    raise SchemaNotReady(
        f"the database {where} is at schema {current}, this rota needs {head}: run `rota migrate`"
    )


def _short(exc: BaseException) -> str:
    return str(getattr(exc, "orig", exc)).strip().splitlines()[0]
