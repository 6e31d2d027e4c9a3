"""Read-only statements on ``jobs`` and ``job_attempts``: status commands, the overlap check."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    RowMapping,
    and_,
    bindparam,
    func,
    or_,
    select,
    text,
    tuple_,
    union_all,
)
from sqlalchemy.sql.expression import BindParameter, Executable

from rota.core.queries.index_hints import broad, indexed_by, selective
from rota.core.queries.job_ids import JobRefError, prefix_bounds
from rota.core.sqltime import db_now
from rota.core.states import (
    CLAIMABLE,
    CLAIMABLE_SQL,
    LEASED,
    LEASED_SQL,
    TERMINAL,
    TERMINAL_SQL,
    UNFINISHED,
)
from rota.core.tables import job_attempts, jobs


def database_now(conn: Connection) -> datetime:
    value = conn.execute(select(db_now())).scalar_one()
    assert isinstance(value, datetime)
    return value


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: each non-empty field narrows (any of its values); empty means all."""

    states: tuple[str, ...] = ()
    job_types: tuple[str, ...] = ()
    schedules: tuple[str, ...] = ()
    created_since: datetime | None = None  # created at or after
    text: str | None = None  # searched for: see ``text_match``

    def clauses(self) -> list[ColumnElement[bool]]:
        """The filter as WHERE clauses, its values bound in them."""
        out = _narrowing(self.counts(), self.created_since is not None, self.values())
        if self.text:
            out.append(text_match(self.text))
        return out

    def counts(self) -> tuple[int, ...]:
        """How many values each field of ``_BY_VALUE`` names (0: any)."""
        return tuple(len(getattr(self, field)) for field, _ in _BY_VALUE)

    def values(self) -> dict[str, object]:
        """The values of ``_narrowing``'s parameters: one named value bound alone, several
        as a list, the instant as ``since``."""
        out: dict[str, object] = {}
        for field, _ in _BY_VALUE:
            named = getattr(self, field)
            if named:
                out[field] = named[0] if len(named) == 1 else list(named)
        if self.created_since is not None:
            out["since"] = self.created_since
        return out


# The fields of a JobFilter that name values of a column, each bound under its name.
_BY_VALUE = (
    ("states", jobs.c.state),
    ("job_types", jobs.c.job_type),
    ("schedules", jobs.c.schedule_name),
)


def _narrowing(
    counts: tuple[int, ...], since: bool, values: Mapping[str, object] | None = None
) -> list[ColumnElement[bool]]:
    """The clauses of a filter naming ``counts`` values of each ``_BY_VALUE`` field (and an
    instant, ``since``), as parameters named for the fields: ``values`` bound in them
    (``JobFilter.values``), or, without, bound when the statement runs."""

    def param(name: str, **kw: Any) -> BindParameter[Any]:
        if values is None:
            return bindparam(name, **kw)
        return bindparam(name, values[name], **kw)

    out: list[ColumnElement[bool]] = []
    for (field, column), count in zip(_BY_VALUE, counts, strict=True):
        if count == 1:  # "=", as a single value was always written: the same plans
            out.append(column == param(field, type_=column.type))
        elif count:
            out.append(column.in_(param(field, expanding=True)))
    if since:
        out.append(jobs.c.created_at >= param("since", type_=jobs.c.created_at.type))
    return out


def text_match(text: str) -> ColumnElement[bool]:
    """A job whose id starts with ``text`` (8 hex digits or more, dashes ignored), or whose
    dedup key, error code or error detail contains it (any case).

    The id part is a primary-key range, as ``rota.core.queries.job_ids`` finds a
    prefix; the others are a filter on the rows the rest of the query reads: a
    listing still walks its index newest first and stops at its page's end, so
    a search costs what the rows read before ``limit`` matches cost (``since``
    bounds it in time). ``%`` and ``_`` in ``text`` are plain characters.
    """
    found: list[ColumnElement[bool]] = [
        column.icontains(text, autoescape=True)
        for column in (jobs.c.dedup_key, jobs.c.last_error_code, jobs.c.last_error_detail)
    ]
    try:
        low, high = prefix_bounds(text)
    except JobRefError:
        pass  # not an id or a prefix of one: the other columns only
    else:
        found.insert(0, and_(jobs.c.job_id >= low, jobs.c.job_id <= high))
    return or_(*found)


@dataclass(frozen=True)
class Keyset:
    """Where a page ends: its last row. The next page starts strictly after it."""

    created_at: datetime
    job_id: uuid.UUID


# Each state's rows in created_at order: finished ones in ix_jobs_history,
# waiting ones in ix_jobs_waiting_created. Leased ones (as many as the
# executors' slots) are read from ix_jobs_leased and sorted. A part's WHERE repeats the
# index's own predicate so SQLite (which matches it textually) can use the
# index, and ``indexed_by`` makes it, whatever statistics the file holds.
_STATE_GROUPS = (
    (TERMINAL, TERMINAL_SQL, "ix_jobs_history"),
    (CLAIMABLE, CLAIMABLE_SQL, "ix_jobs_waiting_created"),
    (LEASED, LEASED_SQL, "ix_jobs_leased"),
)


def newest_jobs(
    conn: Connection, where: JobFilter, *, limit: int | None, after: Keyset | None = None
) -> Sequence[RowMapping]:
    """Jobs matching ``where``, newest first by (created_at, job_id), after ``after``.

    Read as one part per state wanted, each the first ``limit`` rows of its
    state's range of an index on (state, created_at, job_id), then merged: the cost
    follows ``limit`` and the number of states, not the size of the history
    or the depth of the queue (``limit`` None: every match). The keyset
    bounds each range: a page deep in the history costs what the first does.
    """
    asked = set(where.states or (*TERMINAL, *UNFINISHED))
    wanted = tuple(state for state, _, _ in _PARTS if state in asked)
    if not wanted:
        return []
    narrowing = replace(where, states=())  # the parts read one state each
    values = narrowing.values()
    if after is not None:
        values["after_created_at"], values["after_job_id"] = after.created_at, after.job_id
    if limit is not None:
        values["limit"] = limit
    shape = _Shape(
        wanted,
        narrowing.counts(),
        where.created_since is not None,
        after is not None,
        limit is not None,
    )
    # A search's LIKE patterns are escaped as literals: its statement is built each time.
    stmt = _statement(shape, text_match(where.text)) if where.text else _shaped_statement(shape)
    return conn.execute(stmt, values).mappings().all()


# (state, its group's SQL, the group's index) for each state a listing can read.
_PARTS = tuple(
    (state, group_sql, index) for group, group_sql, index in _STATE_GROUPS for state in group
)


@dataclass(frozen=True)
class _Shape:
    """What a listing's statement is made of; its values are bound when it runs."""

    states: tuple[str, ...]
    counts: tuple[int, ...]  # JobFilter.counts, its states left to the parts
    since: bool
    after: bool
    limited: bool


@functools.lru_cache(maxsize=256)
def _shaped_statement(shape: _Shape) -> Executable:
    """One listing statement per shape, built once: building its parts and their
    subqueries anew cost about 30 ms of CPU a page (the compiled form was cached)."""
    return _statement(shape)


def _statement(shape: _Shape, *extra: ColumnElement[bool]) -> Executable:
    narrowed = [*_narrowing(shape.counts, shape.since), *extra]
    if shape.after:
        narrowed.append(
            # typed as the columns: a keyset in another time zone is compared in UTC
            tuple_(jobs.c.created_at, jobs.c.job_id)
            < tuple_(
                bindparam("after_created_at", type_=jobs.c.created_at.type),
                bindparam("after_job_id", type_=jobs.c.job_id.type),
            )
        )
    limit = bindparam("limit", type_=Integer) if shape.limited else None
    order = (jobs.c.created_at.desc(), jobs.c.job_id.desc())
    parts = [
        indexed_by(
            select(jobs)
            .where(
                broad(text(f"jobs.state IN {group_sql}")),
                selective(jobs.c.state == state),
                *narrowed,
            )
            .order_by(*order)
            .limit(limit),
            jobs,
            index,
        )
        for state, group_sql, index in _PARTS
        if state in shape.states
    ]
    if len(parts) == 1:
        return parts[0]
    merged = union_all(*(p.subquery().select() for p in parts)).subquery()
    return select(merged).order_by(merged.c.created_at.desc(), merged.c.job_id.desc()).limit(limit)


def recent_failed(conn: Connection, limit: int) -> Sequence[RowMapping]:
    """The last ``limit`` jobs to fail, newest first (the dashboard's list).

    The end of ``ix_jobs_failed_recent`` (finished_at, job_id; FAILED rows only):
    the cost follows ``limit``, not the number of failed jobs kept (30 days of
    them by default) nor how many job types they are of.
    """
    stmt = indexed_by(
        select(jobs)
        .where(text("jobs.state = 'FAILED'"))  # the index's predicate, as SQLite matches it
        .order_by(jobs.c.finished_at.desc(), jobs.c.job_id.desc())
        .limit(limit),
        jobs,
        "ix_jobs_failed_recent",
    )
    return conn.execute(stmt).mappings().all()


def list_jobs(
    conn: Connection,
    *,
    state: str | None = None,
    schedule: str | None = None,
    where: JobFilter | None = None,
    limit: int | None = 100,
) -> Sequence[RowMapping]:
    """The newest ``limit`` jobs (None: all) matching ``where`` (and ``state``, ``schedule``)."""
    where = where or JobFilter()
    states = set(where.states or (*TERMINAL, *UNFINISHED))
    if state is not None:
        states &= {state}
    ordered = tuple(s for s in (*TERMINAL, *UNFINISHED) if s in states)
    if not ordered:  # no known state wanted: none, not all
        return []
    schedules = where.schedules if schedule is None else (schedule,)
    return newest_jobs(conn, replace(where, states=ordered, schedules=schedules), limit=limit)


def count_by_state(conn: Connection, where: JobFilter) -> dict[str, int]:
    """{state: how many jobs match ``where``} (states with none are left out)."""
    rows = conn.execute(
        select(jobs.c.state, func.count()).where(*where.clauses()).group_by(jobs.c.state)
    ).all()
    return {state: int(n) for state, n in rows}


def count_matches(conn: Connection, where: JobFilter, cap: int) -> int:
    """How many jobs match ``where``, up to ``cap``: the count reads at most ``cap`` rows."""
    first = select(jobs.c.job_id).where(*where.clauses()).limit(cap).subquery()
    return int(conn.execute(select(func.count()).select_from(first)).scalar_one())


def job_ids_after(
    conn: Connection, where: JobFilter, after: uuid.UUID | None, limit: int
) -> list[uuid.UUID]:
    """The next ``limit`` ids matching ``where``, in id order after ``after`` (keyset paging).

    Bulk operations walk the matches with this, one bounded batch at a time,
    along the primary key: every batch starts where the last one ended.
    """
    stmt = select(jobs.c.job_id).where(*where.clauses())
    if after is not None:
        stmt = stmt.where(jobs.c.job_id > after)
    return list(conn.execute(stmt.order_by(jobs.c.job_id).limit(limit)).scalars())


def get_job(conn: Connection, job_id: uuid.UUID) -> RowMapping | None:
    return conn.execute(select(jobs).where(jobs.c.job_id == job_id)).mappings().first()


def get_attempts(conn: Connection, job_id: uuid.UUID) -> Sequence[RowMapping]:
    return (
        conn.execute(
            select(job_attempts)
            .where(job_attempts.c.job_id == job_id)
            .order_by(job_attempts.c.lease_generation)
        )
        .mappings()
        .all()
    )


def unfinished_runs(
    conn: Connection, job_ids: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, str | None, str]]:
    """(job id, dedup key, state) of each of ``job_ids``, oldest first: what a refusal names."""
    rows = conn.execute(
        select(jobs.c.job_id, jobs.c.dedup_key, jobs.c.state)
        .where(jobs.c.job_id.in_(list(job_ids)))
        .order_by(jobs.c.created_at, jobs.c.job_id)
    ).all()
    return [(r[0], r[1], str(r[2])) for r in rows]


def unfinished_jobs_of_schedules(
    conn: Connection, names: Sequence[str]
) -> dict[str, list[uuid.UUID]]:
    """The job ids of each schedule's runs that are not in a terminal state."""
    if not names:
        return {}
    rows = conn.execute(
        select(jobs.c.schedule_name, jobs.c.job_id).where(
            jobs.c.schedule_name.in_(names), jobs.c.state.in_(UNFINISHED)
        )
    ).all()
    out: dict[str, list[uuid.UUID]] = {}
    for name, job_id in rows:
        out.setdefault(name, []).append(job_id)
    return out
