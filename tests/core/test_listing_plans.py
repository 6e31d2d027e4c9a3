"""Listing jobs newest first reads about ``limit`` rows per state, whatever the tables hold.

``rota jobs``, ``GET /jobs`` and the dashboard's last failures show the newest
jobs. With a long history and a deep queue, reading every unfinished job (or
every job, or every failure kept) to sort them and keep the first page made
the listing cost follow the table: at a million finished jobs beside 24,000
unfinished ones, ``rota jobs`` read the table by a sequential scan (0.4x its
empty-table speed). The rows each part of a statement reads are asserted
(PostgreSQL's EXPLAIN ANALYZE), and on SQLite the plan (each part reads its
rows through an index, in order). Jobs made in one transaction share their
``created_at``: the history here is made of such groups, across states, and
every page of a keyset walk is checked against a sort done here.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, insert, select, text

from rota.core.config import JobTypeSpec
from rota.core.database import make_engine
from rota.core.queries import jobs_read
from rota.core.queries.index_hints import indexed_by
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.jobs_read import (
    JobFilter,
    Keyset,
    list_jobs,
    newest_jobs,
    recent_failed,
)
from rota.core.states import TERMINAL, UNFINISHED
from rota.core.tables import jobs
from tests.support.db_support import BACKENDS, cloned_pg_database, migrated_sqlite_url
from tests.support.plan_support import captured_statements

ROWS = 30_000  # every 10th unfinished: 3,000 unfinished jobs beside 27,000 finished ones
TIED = 5  # jobs sharing one created_at, as those inserted in one transaction do
LIMIT = 20
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _state(i: int) -> str:
    if i % 10 == 0:
        return UNFINISHED[(i // 10) % 2]  # QUEUED, RETRY_WAIT: no lease to hold
    return TERMINAL[i % 3]


def _row(i: int, state_of: Callable[[int], str] = _state) -> dict[str, Any]:
    state = state_of(i)
    at = T0 + timedelta(seconds=i // TIED)
    finished = at + timedelta(seconds=(i * 7919) % 10_000)  # not in created_at order
    return {
        "job_id": uuid.uuid4(),
        "job_type": ("a", "b")[i % 2],
        "pool": "default",
        "state": state,
        "attempt_count": 0 if state in UNFINISHED else 1,
        "max_attempts": 5,
        "run_after": at,
        "lease_generation": 0 if state in UNFINISHED else 1,
        "finished_at": None if state in UNFINISHED else finished,
        "schedule_name": "s" if i % 4 == 0 else None,
        "scheduled_for": at if i % 4 == 0 else None,
        "created_at": at,
        "updated_at": T0 + timedelta(seconds=ROWS - i),  # neither order
    }


def _make_history(
    engine: Engine, state_of: Callable[[int], str] = _state, *, analyze: bool = True
) -> Engine:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name=n, handler="m:f") for n in ("a", "b")])
        for start in range(0, ROWS, 5_000):
            conn.execute(insert(jobs), [_row(i, state_of) for i in range(start, start + 5_000)])
    # Statistics: on PostgreSQL as autovacuum keeps them; on SQLite as an operator's
    # ANALYZE or PRAGMA optimize leaves them. Without: as rota leaves a SQLite file
    # (it never analyzes it), and PostgreSQL before its first autovacuum.
    if analyze:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE"))
    return engine


@pytest.fixture(scope="module", params=BACKENDS)
def history(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One history per backend for the tests of this module, which only read it.

    Building 30,000 jobs and their statistics took 3 to 4 s per test.
    """
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = migrated_sqlite_url(tmp_path_factory.mktemp("history") / "rota.db")
        else:
            admin, template = (request.getfixturevalue(f) for f in ("pg_admin_url", "pg_template"))
            url = stack.enter_context(cloned_pg_database(admin, template))
        engine = make_engine(url, pool_size=10)
        stack.callback(engine.dispose)
        yield _make_history(engine)


@pytest.fixture(scope="module")
def every(history: Engine) -> list[Any]:
    """Every job of ``history``, sorted here: newest created first, then the greater job
    id. Read once per backend: the tests only read the history, and each read of the
    30,000 rows took about a second of CPU."""
    with history.connect() as conn:
        rows = conn.execute(select(jobs)).mappings().all()
    return sorted(rows, key=lambda r: (r["created_at"], r["job_id"]), reverse=True)


def _pg_reads(conn: Connection, statement: str, params: Any) -> list[int]:
    """For each scan of ``jobs`` in the plan: the rows it produced or filtered out."""
    (doc,) = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params).one()
    plan = (json.loads(doc) if isinstance(doc, str) else doc)[0]["Plan"]
    reads: list[int] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "jobs":
            per_loop = (
                node["Actual Rows"]
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            )
            reads.append(per_loop * node["Actual Loops"])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan)
    return reads


def _sqlite_plan(conn: Connection, statement: str, params: Any) -> list[tuple[int, int, str]]:
    """(id, parent, detail) of each line of the plan."""
    return [
        (r[0], r[1], r[3]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)
    ]


Listing = Callable[[Connection], Sequence[Any]]
EVERY = len(TERMINAL) + len(UNFINISHED)
LEASED_SCAN = r"(SCAN|SEARCH) jobs USING INDEX ix_jobs_leased\b.*"
_BY_STATE_INDEX = r"SEARCH jobs USING INDEX ix_jobs_(history|waiting_created) "
BY_STATE = _BY_STATE_INDEX + r"\(state=\?\)"
BY_STATE_AFTER = _BY_STATE_INDEX + r"\(state=\? AND \(created_at,job_id\)<\(\?,\?\)\)"

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
    # half the jobs are of type a, alternating: a part reads about twice its limit
    (
        "of a type",
        lambda c: list_jobs(c, where=JobFilter(job_types=("a",)), limit=LIMIT),
        EVERY,
        2 * LIMIT + 2,
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


def _one_state_each(i: int) -> str:
    """No job failed yet, none waits to retry: each listing index holds a single state."""
    return "QUEUED" if _state(i) in UNFINISHED else "SUCCEEDED"


# Never analyzed: SQLite only, as rota never analyzes its file. PostgreSQL's
# autovacuum analyzes a table after its first 50 + 10% rows changed; before
# that its planner guesses (at 30,000 rows it sorted each state's 9,000 rows).
@pytest.mark.parametrize(
    "backend,state_of,analyze",
    [
        ("sqlite", _state, False),
        ("sqlite", _one_state_each, False),
        ("sqlite", _one_state_each, True),
        ("postgresql", _one_state_each, True),
    ],
    ids=[
        "sqlite-never analyzed",
        "sqlite-one state per index, never analyzed",
        "sqlite-one state per index",
        "postgresql-one state per index",
    ],
)
def test_the_plan_holds_whatever_the_statistics(
    engine: Engine, state_of: Callable[[int], str], analyze: bool
) -> None:
    """Each part reads its state's range in order, with no statistics or with odd ones.

    The module's other tests read a history whose statistics saw every state.
    With statistics that saw one state per index, ``state = ?`` looks no better
    to SQLite than the part's ``state IN (...)`` (the index's predicate), and
    3.40 took the IN, whose several ranges are not in created_at order: it read
    and sorted every SUCCEEDED job for each page. With none at all (every
    SQLite file rota makes), the first remedy for that did the same.
    """
    history = _make_history(engine, state_of, analyze=analyze)
    with history.connect() as conn:
        for _, listing, parts, per_part in _NEWEST:
            for statement, params in _statements(conn, listing):
                _assert_bounded(conn, statement, params, parts, per_part)


def test_a_page_far_down_the_history_is_read_from_where_it_starts(
    history: Engine, every: list[Any]
) -> None:
    """The keyset bounds each part's index range, inside a group of equal created_at too."""
    with history.connect() as conn:
        deep = every[20_002]  # the middle of a group of TIED
        assert deep["created_at"] == every[20_001]["created_at"] == every[20_003]["created_at"]
        after = Keyset(deep["created_at"], deep["job_id"])

        def listing(c: Connection) -> Sequence[Any]:
            return newest_jobs(c, JobFilter(), limit=LIMIT + 1, after=after)

        listed = [r["job_id"] for r in listing(conn)]
        assert listed == [r["job_id"] for r in every[20_003 : 20_003 + LIMIT + 1]]
        for statement, params in _statements(conn, listing):
            _assert_bounded(conn, statement, params, EVERY, LIMIT + 1, BY_STATE_AFTER)


_WALKS = [
    JobFilter(),
    JobFilter(states=("SUCCEEDED", "QUEUED")),
    JobFilter(job_types=("a",), schedules=("s",)),
    JobFilter(created_since=T0 + timedelta(seconds=ROWS // TIED - 700)),
]


@pytest.mark.parametrize("where", _WALKS, ids=["all", "two states", "type and schedule", "since"])
def test_a_keyset_walk_lists_every_match_once_in_order(
    history: Engine, every: list[Any], where: JobFilter
) -> None:
    """Page after page of 8, the first 560 matches: many pages end inside a group of
    jobs sharing created_at, where only the job id tells what comes next."""
    page_size, walk = 8, 560
    with history.connect() as conn:
        matches = [
            r
            for r in every
            if (not where.states or r["state"] in where.states)
            and (not where.job_types or r["job_type"] in where.job_types)
            and (not where.schedules or r["schedule_name"] in where.schedules)
            and (where.created_since is None or r["created_at"] >= where.created_since)
        ][: walk + 1]
        assert len(matches) == walk + 1
        split = sum(
            matches[end - 1]["created_at"] == matches[end]["created_at"]
            for end in range(page_size, walk + 1, page_size)
        )
        assert split >= 10, f"only {split} page ends fall inside a group: a weak walk"
        expected = [r["job_id"] for r in matches[:walk]]
        walked: list[uuid.UUID] = []
        after = None
        while len(walked) < len(expected):
            page = newest_jobs(conn, where, limit=page_size, after=after)
            assert page, f"the walk ended after {len(walked)} of {len(expected)}"
            walked += [r["job_id"] for r in page]
            after = Keyset(page[-1]["created_at"], page[-1]["job_id"])
    assert walked[: len(expected)] == expected


def test_pages_of_one_shape_share_one_built_statement(history: Engine, every: list[Any]) -> None:
    """Building a listing's parts and subqueries cost about 30 ms of CPU a page on
    every call; a page of the same filter shape (other values) reuses the statement."""
    jobs_read._shaped_statement.cache_clear()
    with history.connect() as conn:
        for mark in (every[10], every[500], every[9_000]):
            where = JobFilter(job_types=("a",), created_since=T0)
            page = newest_jobs(
                conn, where, limit=5, after=Keyset(mark["created_at"], mark["job_id"])
            )
            below = [
                r
                for r in every
                if (r["created_at"], r["job_id"]) < (mark["created_at"], mark["job_id"])
            ]
            assert [r["job_id"] for r in page] == [
                r["job_id"] for r in below if r["job_type"] == "a"
            ][:5]
    built = jobs_read._shaped_statement.cache_info()
    assert (built.misses, built.hits) == (1, 2)


def test_a_keyset_in_another_time_zone_is_the_same_instant(
    history: Engine, every: list[Any]
) -> None:
    """A keyset written at +05:00 pages as its UTC instant does (SQLite stores UTC text)."""
    with history.connect() as conn:
        mark = every[101]
        shifted = mark["created_at"].astimezone(timezone(timedelta(hours=5)))
        page = newest_jobs(conn, JobFilter(), limit=3, after=Keyset(shifted, mark["job_id"]))
    assert [r["job_id"] for r in page] == [r["job_id"] for r in every[102:105]]


def _statements(conn: Connection, listing: Listing) -> list[tuple[str, Any]]:
    with captured_statements(conn) as seen:
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
    """``parts`` reads of ``jobs``, each at most ``per_part`` rows; on SQLite, ``search``es."""
    if conn.dialect.name == "postgresql":
        reads = _pg_reads(conn, statement, params)
        explained = conn.exec_driver_sql("EXPLAIN ANALYZE " + statement, params)
        shown = "\n".join(r[0] for r in explained)
        assert len(reads) == parts, shown
        assert max(reads) <= per_part, f"{reads} rows read by the parts:\n{shown}"
        return
    lines = _sqlite_plan(conn, statement, params)
    shown = "\n".join(map(str, lines))
    scans = [(parent, d) for _, parent, d in lines if re.search(r"\b(SCAN|SEARCH) jobs\b", d)]
    assert len(scans) == parts, shown
    for parent, detail in scans:
        if re.fullmatch(LEASED_SCAN, detail):
            continue  # leased jobs, as many as the executors' slots: read whole and sorted
        assert re.fullmatch(search, detail), shown
        # rows read in index order up to the limit: no sort of the part's rows
        assert not [d for _, p, d in lines if p == parent and "TEMP B-TREE" in d], shown


def test_the_last_jobs_to_fail_are_read_without_reading_every_failure(history: Engine) -> None:
    """The dashboard's list: 9,000 failed jobs kept, read from the end of their index."""
    with history.connect() as conn:
        failed = recent_failed(conn, LIMIT)
        every = conn.execute(select(jobs).where(jobs.c.state == "FAILED")).mappings().all()
        last = sorted(every, key=lambda r: (r["finished_at"], r["job_id"]), reverse=True)
        assert [r["job_id"] for r in failed] == [r["job_id"] for r in last[:LIMIT]]
        assert len(every) == 9_000
        for statement, params in _statements(conn, lambda c: recent_failed(c, LIMIT)):
            _assert_bounded(
                conn, statement, params, 1, LIMIT, r"SCAN jobs USING INDEX ix_jobs_failed_recent"
            )


def test_the_listing_is_newest_first(history: Engine, every: list[Any]) -> None:
    ids = [r["job_id"] for r in every]
    with history.connect() as conn:
        assert [r["job_id"] for r in list_jobs(conn, limit=LIMIT)] == ids[:LIMIT]
        assert [r["job_id"] for r in list_jobs(conn, limit=None)] == ids


def test_an_index_the_table_lacks_is_refused_when_the_statement_is_built() -> None:
    with pytest.raises(ValueError, match="jobs has no index 'ix_jobs_nope'"):
        indexed_by(select(jobs), jobs, "ix_jobs_nope")


def test_a_hint_for_a_table_the_statement_does_not_read_is_refused() -> None:
    """An alias of ``jobs`` is another FROM: the hint would be dropped without a word."""
    with pytest.raises(ValueError, match="does not read jobs itself"):
        indexed_by(select(jobs.alias()), jobs, "ix_jobs_history")
