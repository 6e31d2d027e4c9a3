"""Listing jobs newest first reads about ``limit`` rows per state, whatever the tables hold.

``rota jobs`` and ``GET /jobs`` show the newest jobs. With a long history and
a deep queue, reading every unfinished job (or every job) to sort them and
keep the first page made the listing cost follow the table: at a million
finished jobs beside 24,000 unfinished ones, ``rota jobs`` read the table by a
sequential scan (0.4x its empty-table speed). The rows each statement reads
are asserted (PostgreSQL's EXPLAIN ANALYZE), and on SQLite the plan (every
part of it reads its state's rows through an index, in order).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, insert, select, text

from rota.shared.config.model import JobTypeSpec
from rota.shared.models import jobs
from rota.shared.queries.job_types import upsert_job_types
from rota.shared.queries.jobs_read import (
    JobFilter,
    Keyset,
    list_jobs,
    newest_jobs,
    recent_failed,
)
from rota.shared.states import TERMINAL, UNFINISHED

ROWS = 30_000  # every 10th unfinished: 3,000 unfinished jobs beside 27,000 finished ones
LIMIT = 20
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _state(i: int) -> str:
    if i % 10 == 0:
        return UNFINISHED[(i // 10) % 2]  # QUEUED, RETRY_WAIT: no lease to hold
    return TERMINAL[i % 3]


def _row(i: int) -> dict[str, Any]:
    state = _state(i)
    at = T0 + timedelta(seconds=i)
    return {
        "job_id": uuid.uuid4(),
        "job_type": ("a", "b")[i % 2],
        "pool": "default",
        "state": state,
        "attempt_count": 0 if state in UNFINISHED else 1,
        "max_attempts": 5,
        "run_after": at,
        "lease_generation": 0 if state in UNFINISHED else 1,
        "finished_at": None if state in UNFINISHED else at,
        "schedule_name": "s" if i % 4 == 0 else None,
        "scheduled_for": at if i % 4 == 0 else None,
        "created_at": at,
        "updated_at": at,
    }


@pytest.fixture
def history(engine: Engine) -> Engine:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name=n, handler="m:f") for n in ("a", "b")])
        for start in range(0, ROWS, 5_000):
            conn.execute(insert(jobs), [_row(i) for i in range(start, start + 5_000)])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE"))
    return engine


@contextmanager
def _captured(conn: Connection) -> Iterator[list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, _many: bool) -> None:
        seen.append((statement, params))

    event.listen(conn, "before_cursor_execute", keep)
    try:
        yield seen
    finally:
        event.remove(conn, "before_cursor_execute", keep)


def _pg_rows_read(conn: Connection, statement: str, params: Any) -> int:
    """Rows the plan's scans of ``jobs`` produced or filtered out, over all loops."""
    (doc,) = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params).one()
    plan = (json.loads(doc) if isinstance(doc, str) else doc)[0]["Plan"]

    def walk(node: dict[str, Any]) -> int:
        own = 0
        if node.get("Relation Name") == "jobs":
            per_loop = (
                node["Actual Rows"]
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            )
            own = per_loop * node["Actual Loops"]
        return own + sum(walk(child) for child in node.get("Plans", []))

    return walk(plan)


def _sqlite_plan(conn: Connection, statement: str, params: Any) -> list[tuple[int, int, str]]:
    """(id, parent, detail) of each line of the plan."""
    return [
        (r[0], r[1], r[3]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)
    ]


Listing = Callable[[Connection], Sequence[Any]]
_INDEXES = r"SEARCH jobs USING INDEX ix_jobs_(history|unfinished_created) "
BY_STATE = _INDEXES + r"\(state=\?\)"
BY_STATE_AFTER = _INDEXES + r"\(state=\? AND created_at<\?\)"
EVERY = len(TERMINAL) + len(UNFINISHED)

# (name, listing, parts: one per state read, rows each part may read)
_NEWEST: list[tuple[str, Listing, int, int]] = [
    ("all", lambda c: list_jobs(c, limit=LIMIT), EVERY, LIMIT),
    ("queued", lambda c: list_jobs(c, state="QUEUED", limit=LIMIT), 1, LIMIT),
    (
        "unfinished",
        lambda c: list_jobs(c, where=JobFilter(states=UNFINISHED), limit=LIMIT),
        len(UNFINISHED),
        LIMIT,
    ),
    # half the jobs are of type a: a part reads about twice its limit
    (
        "of a type",
        lambda c: list_jobs(c, where=JobFilter(job_types=("a",)), limit=LIMIT),
        EVERY,
        2 * LIMIT,
    ),
    ("api page", lambda c: newest_jobs(c, JobFilter(), limit=LIMIT + 1), EVERY, LIMIT + 1),
    (
        "api queued",
        lambda c: newest_jobs(c, JobFilter(states=("QUEUED",)), limit=LIMIT + 1),
        1,
        LIMIT + 1,
    ),
]


@pytest.mark.parametrize(
    "listing,parts,per_part", [case[1:] for case in _NEWEST], ids=[case[0] for case in _NEWEST]
)
def test_the_newest_jobs_are_read_without_reading_the_rest(
    history: Engine, listing: Listing, parts: int, per_part: int
) -> None:
    with history.connect() as conn:
        for statement, params in _statements(conn, listing):
            _assert_bounded(conn, statement, params, parts, per_part)


def test_a_page_far_down_the_history_is_read_from_where_it_starts(history: Engine) -> None:
    """Page after page: the keyset bounds the index range, not a filter over the newer rows."""
    newest_first = (jobs.c.created_at.desc(), jobs.c.job_id.desc())
    with history.connect() as conn:
        deep = conn.execute(
            select(jobs.c.created_at, jobs.c.job_id).order_by(*newest_first).offset(20_000).limit(1)
        ).one()
        following = (
            conn.execute(
                select(jobs.c.job_id).order_by(*newest_first).offset(20_001).limit(LIMIT + 1)
            )
            .scalars()
            .all()
        )
        after = Keyset(deep.created_at, deep.job_id)

        def listing(c: Connection) -> Sequence[Any]:
            return newest_jobs(c, JobFilter(), limit=LIMIT + 1, after=after)

        assert [r["job_id"] for r in listing(conn)] == following
        for statement, params in _statements(conn, listing):
            _assert_bounded(conn, statement, params, EVERY, LIMIT + 1, BY_STATE_AFTER)


def _statements(conn: Connection, listing: Listing) -> list[tuple[str, Any]]:
    with _captured(conn) as seen:
        rows = listing(conn)
    assert rows, "the listing returned nothing: the history was not built"
    return [(s, p) for s, p in seen if "FROM jobs" in s]


def _assert_bounded(
    conn: Connection,
    statement: str,
    params: Any,
    parts: int,
    per_part: int,
    search: str = BY_STATE,
) -> None:
    """At most ``per_part`` rows read per part; on SQLite, each part a ``search`` in order."""
    if conn.dialect.name == "postgresql":
        read = _pg_rows_read(conn, statement, params)
        # each part reads its rows, plus the one that ends an equal-created_at group
        assert read <= parts * (per_part + 1), (
            f"{read} rows read, {parts} parts:\n{statement}\n"
            + "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN ANALYZE " + statement, params))
        )
        return
    plan = _sqlite_plan(conn, statement, params)
    scans = [(parent, d) for _, parent, d in plan if re.search(r"\b(SCAN|SEARCH) jobs\b", d)]
    assert len(scans) == parts, "\n".join(map(str, plan))
    for parent, detail in scans:
        assert re.fullmatch(search, detail), "\n".join(map(str, plan))
        # rows read in index order up to the limit: no sort of the part's rows
        # (a sort of the job ids of one created_at, its RIGHT PART, stops there too)
        sorts = [d for _, p, d in plan if p == parent and "TEMP B-TREE" in d]
        assert all("RIGHT PART" in d for d in sorts), "\n".join(map(str, plan))


def test_the_last_jobs_to_fail_are_read_without_reading_every_failure(history: Engine) -> None:
    """The dashboard's list: 9,000 failed jobs kept, two types, a page of each read."""
    with history.connect() as conn:
        failed = recent_failed(conn, ["a", "b", "never failed"], LIMIT)
        last = (
            conn.execute(
                select(jobs.c.job_id)
                .where(jobs.c.state == "FAILED")
                .order_by(jobs.c.finished_at.desc(), jobs.c.job_id.desc())
                .limit(LIMIT)
            )
            .scalars()
            .all()
        )
        assert [r["job_id"] for r in failed] == last
        assert recent_failed(conn, [], LIMIT) == []
        by_type = r"SEARCH jobs USING INDEX ix_jobs_finished \(state=\? AND job_type=\?\)"
        for statement, params in _statements(
            conn, lambda c: recent_failed(c, ["a", "b", "never failed"], LIMIT)
        ):
            _assert_bounded(conn, statement, params, 3, LIMIT, by_type)


def test_the_listing_is_newest_first(history: Engine) -> None:
    with history.connect() as conn:
        listed = list_jobs(conn, limit=LIMIT)
        paged = newest_jobs(conn, JobFilter(), limit=LIMIT)
        every = (
            conn.execute(select(jobs.c.job_id).order_by(jobs.c.created_at.desc()).limit(LIMIT))
            .scalars()
            .all()
        )
    assert [str(r["job_id"]) for r in listed] == [str(j) for j in every]
    assert [str(r["job_id"]) for r in paged] == [str(j) for j in every]
