"""The database clock inside statements, on both backends.

Every timestamp that decides ownership or due-ness is computed by the database:
``db_now()`` is ``now()`` on PostgreSQL and the SQLite clock on SQLite (one host,
so one clock), formatted exactly like the stored ``UTCDateTime`` values so that
comparisons are correct. Statement builders take ``now: datetime | None``: tests
pass an instant, production passes ``None`` and gets the database clock, the
``coalesce(:now, now())`` idea.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, TypeDecorator, literal
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.expression import FunctionElement

# SQLAlchemy's SQLite DATETIME storage format; the SQLite clock is rendered the same way.
_SQLITE_NOW_FMT = "%Y-%m-%d %H:%M:%f000"


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC instant: ``timestamptz`` on PostgreSQL, text in UTC on SQLite."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} bound to a UTC column")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return read_utc(value)


def read_utc(value: Any) -> datetime | None:
    """A stored instant as an aware UTC datetime: SQLite gives text, PostgreSQL a datetime.

    PostgreSQL's datetimes come in the session's zone; a server set to a name of
    UTC (Debian's default is ``Etc/UTC``) gives a ZoneInfo, relabelled here at a
    third of the cost of ``astimezone`` (an executor reads five per claimed job).
    """
    if value is None:
        return None
    instant = datetime.fromisoformat(value) if isinstance(value, str) else value
    assert isinstance(instant, datetime)
    zone = instant.tzinfo
    if zone is UTC:
        return instant
    if zone is None or getattr(zone, "key", None) in _UTC_NAMES:
        return instant.replace(tzinfo=UTC)
    return instant.astimezone(UTC)


# IANA names of UTC itself (zero offset, never a transition).
_UTC_NAMES = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}
)


class db_now(FunctionElement[datetime]):
    """The database clock, plus an optional number of seconds (a bound value or column)."""

    type = UTCDateTime()
    inherit_cache = True
    name = "db_now"

    def __init__(self, plus_seconds: ColumnElement[Any] | float | None = None) -> None:
        args = [] if plus_seconds is None else [_as_expr(plus_seconds)]
        super().__init__(*args)


def _as_expr(value: ColumnElement[Any] | float) -> ColumnElement[Any]:
    if isinstance(value, int | float):
        return literal(float(value))
    return value


@compiles(db_now, "postgresql")
def _pg_now(element: db_now, compiler: Any, **kw: Any) -> str:
    clauses = list(element.clauses)
    if not clauses:
        return "now()"
    secs = compiler.process(clauses[0], **kw)
    return f"(now() + make_interval(secs => CAST({secs} AS double precision)))"


@compiles(db_now, "sqlite")
def _sqlite_now(element: db_now, compiler: Any, **kw: Any) -> str:
    clauses = list(element.clauses)
    if not clauses:
        return f"strftime('{_SQLITE_NOW_FMT}', 'now')"
    secs = compiler.process(clauses[0], **kw)
    return f"strftime('{_SQLITE_NOW_FMT}', 'now', printf('%+.3f seconds', {secs}))"


def now_or_db(now: datetime | None, plus_seconds: float = 0.0) -> ColumnElement[datetime]:
    """``now + plus_seconds`` when a test injects time, else the database clock."""
    if now is not None:
        from datetime import timedelta

        return literal(now + timedelta(seconds=plus_seconds), UTCDateTime())
    return db_now(plus_seconds if plus_seconds else None)
