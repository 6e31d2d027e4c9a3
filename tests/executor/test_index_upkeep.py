"""Index upkeep on a real PostgreSQL: bloated job-table indexes rebuilt, leftovers dropped.

The queue's partial indexes bloat when many jobs pass through them between two
vacuums; here 30,000 jobs are queued, finished and vacuumed away, which leaves
those indexes hundreds of pages long for no live entry. Rebuilds are real
``REINDEX INDEX CONCURRENTLY`` statements; a rebuild is interrupted by
terminating its server process (SIGTERM), as a crash or a failover would.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, make_url, text

from rota.core.database import libpq_dsn, make_engine
from rota.core.queries.index_upkeep import (
    UPKEEP_LOCK_KEY,
    IndexSize,
    _rebuilt_name,
    index_sizes,
)
from rota.executor.reindexer import CheckResult, Reindexer
from rota.executor.service import Executor
from tests.support.db_support import migrated_sqlite_url
from tests.support.executor_support import REPO_ROOT, wait_for

QUEUE_INDEXES = {"ix_jobs_state", "ix_jobs_waiting_created", "ix_jobs_claimable"}
MIN_PAGES = 50  # the test's bloat is a few hundred pages; production waits for 1,024

_QUEUE = """
    INSERT INTO jobs (job_id, job_type, pool, state, attempt_count, max_attempts, run_after,
                      lease_seconds, created_at, updated_at)
    SELECT gen_random_uuid(), 'upkeep.job', 'default', 'QUEUED', 0, 5,
           now() + g * interval '1 millisecond', 60, now(), now()
    FROM generate_series(1, :n) AS g
"""
_FINISH = "UPDATE jobs SET state = 'SUCCEEDED', finished_at = now() WHERE job_type = 'upkeep.job'"

# Advisory locks held in this test's database: the server may serve other tests' too.
_ADVISORY_LOCKS_HERE = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def hold_snapshot(holder: psycopg.Connection[Any], table: str = "jobs") -> None:
    """An open snapshot (any table will do): a REINDEX CONCURRENTLY waits for it to end."""
    holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    holder.execute(f"SELECT count(*) FROM {table}")


def wait_for_a_waiting_rebuild(watch: psycopg.Connection[Any]) -> None:
    wait_until(
        lambda: (
            watch.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND query LIKE 'REINDEX INDEX CONCURRENTLY%%' AND wait_event_type = 'Lock'"
            ).fetchone()
            is not None
        )
    )


@pytest.fixture
def pg(fresh_pg_url: str) -> Iterator[Engine]:
    engine = make_engine(fresh_pg_url)
    yield engine
    engine.dispose()


def bloat(engine: Engine, n: int = 30_000) -> None:
    with engine.begin() as conn:
        conn.execute(text(_QUEUE), {"n": n})
    with engine.begin() as conn:
        conn.execute(text(_FINISH))
    with engine.connect() as raw:
        conn = raw.execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(text("VACUUM ANALYZE jobs"))


def sizes(engine: Engine) -> dict[str, IndexSize]:
    with engine.connect() as conn:
        return {s.name: s for s in index_sizes(conn)}


def reindexer(
    engine: Engine,
    idle: Callable[[], bool] = lambda: True,
    first_check: float = 300.0,
    interval: float = 3600.0,
    busy_retry: float = 60.0,
) -> Reindexer:
    return Reindexer(
        engine,
        idle,
        first_check=first_check,
        interval=interval,
        busy_retry=busy_retry,
        min_pages=MIN_PAGES,
    )


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", "") == name]


def test_bloated_queue_indexes_are_rebuilt_once_and_the_rest_left_alone(
    pg: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota.executor")
    bloat(pg)
    before = sizes(pg)
    for name in QUEUE_INDEXES:  # the setup did bloat them: hundreds of pages, no entry
        assert before[name].bloated(min_pages=MIN_PAGES), before[name]
    assert not before["pk_jobs"].bloated(min_pages=MIN_PAGES)  # 30,000 live entries

    result = reindexer(pg).check_once()

    rebuilt = {r.name: r for r in result.rebuilt}
    assert set(rebuilt) == {n for n, s in before.items() if s.bloated(min_pages=MIN_PAGES)}
    assert set(rebuilt) >= QUEUE_INDEXES and "pk_jobs" not in rebuilt
    after = sizes(pg)
    for name in QUEUE_INDEXES:
        assert rebuilt[name].pages_before == before[name].pages
        assert after[name].pages == rebuilt[name].pages_after < before[name].pages / 10
        assert after[name].valid
    assert {getattr(r, "fields", {})["index"] for r in events(caplog, "index_rebuilt")} == set(
        rebuilt
    )
    # Nothing is bloated now: the next check rebuilds nothing.
    assert reindexer(pg).check_once() == CheckResult()
    # The rebuilder's session ended with its check: no lock held, and no pooled
    # connection keeps its settings (no statement timeout, a 5 s lock timeout).
    with pg.connect() as conn:
        assert conn.execute(text("SHOW lock_timeout")).scalar() == "0"
        assert conn.execute(text(_ADVISORY_LOCKS_HERE)).scalar() == 0
    # The rebuilt indexes serve the queue: a new job is found through them.
    with pg.begin() as conn:
        conn.execute(text(_QUEUE), {"n": 3})
        plan = "\n".join(
            conn.execute(
                text(
                    "EXPLAIN SELECT job_id FROM jobs WHERE state IN ('QUEUED', 'RETRY_WAIT') "
                    "AND pool = 'default' ORDER BY priority, run_after LIMIT 1"
                )
            ).scalars()
        )
    assert "ix_jobs_claimable" in plan


def test_the_copy_a_killed_rebuild_leaves_is_dropped(
    pg: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A REINDEX CONCURRENTLY whose server process dies leaves ``<name>_ccnew``,
    invalid but written by every insert: the next check drops it, then rebuilds."""
    caplog.set_level(logging.INFO, logger="rota.executor")
    bloat(pg)
    url = libpq_dsn(pg)
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as rebuilder:
        hold_snapshot(holder)  # the rebuild builds its copy, then waits for this to end
        pid = rebuilder.info.backend_pid
        failed: list[BaseException] = []

        def rebuild() -> None:
            try:
                rebuilder.execute("REINDEX INDEX CONCURRENTLY ix_jobs_state")
            except BaseException as exc:
                failed.append(exc)

        t = threading.Thread(target=rebuild)
        t.start()
        with psycopg.connect(url, autocommit=True) as watch:
            wait_until(
                lambda: (
                    watch.execute(
                        "SELECT 1 FROM pg_class WHERE relname = 'ix_jobs_state_ccnew'"
                    ).fetchone()
                    is not None
                )
            )
            watch.execute("SELECT pg_terminate_backend(%s)", (pid,))
        t.join(10)
        assert not t.is_alive() and failed  # the rebuild died with its process
        holder.rollback()
    left = sizes(pg)
    assert "ix_jobs_state_ccnew" in left and not left["ix_jobs_state_ccnew"].valid
    assert left["ix_jobs_state"].valid  # the old index still serves meanwhile
    # Named like a copy but beside no index of its name: someone's own, left alone.
    with pg.begin() as conn:
        conn.execute(text("ALTER INDEX ix_jobs_state_ccnew RENAME TO mine_ccnew"))
    first = reindexer(pg).check_once()
    assert first.dropped == () and "mine_ccnew" in sizes(pg)
    assert "ix_jobs_state" in first.rebuilt_names()  # the rest of the check went on
    with pg.begin() as conn:
        conn.execute(text("ALTER INDEX mine_ccnew RENAME TO ix_jobs_state_ccnew"))

    result = reindexer(pg).check_once()

    assert result.dropped == ("ix_jobs_state_ccnew",)
    now = sizes(pg)
    assert "ix_jobs_state_ccnew" not in now and now["ix_jobs_state"].valid
    assert len(events(caplog, "index_leftover_dropped")) == 1


def test_only_rebuild_copies_count_as_leftovers() -> None:
    for name, base in (
        ("ix_jobs_state_ccnew", "ix_jobs_state"),
        ("ix_a_ccnew1", "ix_a"),
        ("pk_jobs_ccold", "pk_jobs"),
        ("x_ccold12", "x"),
    ):
        assert _rebuilt_name(name) == base, name
    for name in ("ix_jobs_state", "my_ccnew_index", "_ccnew", "ix_ccnewer", "ix_ccold_2"):
        assert _rebuilt_name(name) is None, name


def test_an_index_whose_key_has_no_statistics_is_never_judged() -> None:
    index = IndexSize("public", "ix", "jobs", True, pages=50_000, entries=0, entry_width=None)
    assert index.needed_pages is None and not index.bloated(min_pages=1)
    assert IndexSize("public", "ix", "jobs", True, 50_000, 0, 16).bloated(min_pages=1)


def test_an_index_dropped_while_the_sizes_are_read_is_left_out(pg: Engine) -> None:
    """Another executor's REINDEX CONCURRENTLY drops the old copy of the index it rebuilt:
    a reader whose snapshot still lists it finds no file to measure (no size at all), and
    the check goes on without it."""
    with pg.begin() as conn:
        conn.execute(text("CREATE INDEX ix_jobs_going ON jobs (updated_at)"))
    with pg.connect() as conn:
        conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
        conn.execute(text("SELECT count(*) FROM pg_index"))  # the snapshot lists it
        with pg.begin() as other:
            other.execute(text("DROP INDEX ix_jobs_going"))
        names = {s.name for s in index_sizes(conn)}
    assert "ix_jobs_going" not in names
    assert names >= QUEUE_INDEXES


def test_stale_statistics_do_not_rebuild_a_full_index(pg: Engine) -> None:
    """The statistics say the queue is empty (the last ANALYZE saw it so); 30,000 jobs
    queued since fill its indexes: counted, they are not bloated, and stay as they are."""
    bloat(pg)
    with pg.begin() as conn:
        conn.execute(text(_QUEUE), {"n": 30_000})
    before = sizes(pg)
    assert before["ix_jobs_state"].bloated(min_pages=MIN_PAGES)  # by the statistics
    result = reindexer(pg).check_once()
    assert "ix_jobs_state" not in {r.name for r in result.rebuilt}
    assert sizes(pg)["ix_jobs_state"].pages == before["ix_jobs_state"].pages


def test_a_standby_or_read_only_database_is_left_alone(pg: Engine) -> None:
    bloat(pg)
    with pg.connect() as raw:
        conn = raw.execution_options(isolation_level="AUTOCOMMIT")
        name = conn.execute(text("SELECT current_database()")).scalar_one()
        conn.execute(text(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'))
    pg.dispose()
    assert reindexer(pg).check_once() == CheckResult(skipped=True)


def test_an_old_transaction_ends_the_check_at_its_first_index(
    pg: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A rebuild waits for an open snapshot for the lock timeout, then the check ends:
    the other bloated indexes would wait for the same transaction."""
    caplog.set_level(logging.INFO, logger="rota.executor")
    bloat(pg)
    url = libpq_dsn(pg)
    with psycopg.connect(url) as holder:
        hold_snapshot(holder, "job_types")  # any table: the snapshot counts
        result = reindexer(pg).check_once()
        holder.rollback()
    assert not result.rebuilt and len(result.failed) == 1
    assert len(events(caplog, "index_rebuild_failed")) == 1
    # What the timed-out rebuild left is dropped by the next check, which rebuilds all.
    again = reindexer(pg).check_once()
    assert again.dropped and set(again.rebuilt_names()) >= QUEUE_INDEXES


def test_one_rebuilder_at_a_time(pg: Engine) -> None:
    bloat(pg)
    url = libpq_dsn(pg)
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (UPKEEP_LOCK_KEY,))
        holder = other.info.backend_pid
        assert reindexer(pg).check_once() == CheckResult(locked_out=True)
        assert sizes(pg)["ix_jobs_state"].bloated(min_pages=MIN_PAGES)  # untouched

    # The server ends the session (and its lock) after the client has closed it:
    # a check at once could still find the lock held.
    def session_ended() -> bool:
        with pg.connect() as conn:
            found = conn.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": holder}
            ).scalar_one()
        return int(found) == 0

    wait_for(session_ended, what="the locking session to end")
    assert reindexer(pg).check_once().rebuilt  # the lock ended with its session


def test_stop_cancels_a_rebuild_under_way(pg: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """A rebuild waiting on an old transaction (up to its 5 s lock timeout) does not
    hold up the executor's shutdown: stop() cancels it."""
    caplog.set_level(logging.INFO, logger="rota.executor")
    bloat(pg)
    url = libpq_dsn(pg)
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as watch:
        hold_snapshot(holder)
        r = reindexer(pg, first_check=0.0)
        r.start()
        wait_for_a_waiting_rebuild(watch)
        r.stop(timeout=3.0)  # the lock timeout alone would end it after 5 s, not 3
        assert r._thread is not None and not r._thread.is_alive()
        assert (
            watch.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND query LIKE 'REINDEX%%' AND state = 'active'"
            ).fetchone()
            is None
        )
        holder.rollback()
    assert len(events(caplog, "index_rebuild_stopped")) == 1
    assert not events(caplog, "index_rebuilt")
    assert reindexer(pg).check_once().dropped  # its copy goes at the next check


def test_stop_returns_when_the_network_went_silent_during_a_rebuild(
    pg: Engine, tmp_path: Path
) -> None:
    """The rebuild's connection goes through a proxy that stops forwarding (a partition):
    stop() must come back, and the process's other threads must keep running meanwhile
    (a cancel sent the libpq way blocks holding the GIL: the whole executor froze)."""
    bloat(pg)
    url = make_url(pg.url.render_as_string(hide_password=False))
    upstream = (
        f"{url.host}:{url.port or 5432}"
        if url.host
        else f"{url.query['host']}/.s.PGSQL.{url.query.get('port', '5432')}"
    )
    flag = tmp_path / "silent"
    proxy = subprocess.Popen(
        [sys.executable, "-m", "tests.support.frozen_proxy", "0", upstream, str(flag)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        said, port = proxy.stdout.readline().split()  # "listening PORT": the port it took
        assert said == "listening"
    except BaseException:
        proxy.kill()
        proxy.wait()
        raise
    through = make_engine(
        url.set(host="127.0.0.1", port=int(port), query={}).render_as_string(hide_password=False)
    )
    direct = libpq_dsn(pg)
    try:
        with psycopg.connect(direct) as holder, psycopg.connect(direct, autocommit=True) as w:
            hold_snapshot(holder)
            r = reindexer(through, first_check=0.0)
            r.start()
            wait_for_a_waiting_rebuild(w)
            flag.touch()  # the network goes silent
            ticks = 0

            def ticker() -> None:
                nonlocal ticks
                while not stopped.is_set():
                    ticks += 1
                    time.sleep(0.01)

            stopped = threading.Event()
            threading.Thread(target=ticker, daemon=True).start()
            stopper = threading.Thread(target=r.stop)
            stopper.start()
            stopper.join(20)  # a hang guard: stop() waits a second at most
            assert not stopper.is_alive()
            before = ticks
            wait_until(lambda: ticks > before + 10)  # the other threads were never frozen
            stopped.set()
            holder.rollback()
    finally:
        flag.unlink(missing_ok=True)
        proxy.kill()
        proxy.wait()
        through.dispose()


def test_a_user_that_does_not_own_the_tables_is_told_once_and_nothing_breaks(
    pg: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota.executor")
    bloat(pg)
    role = f"rota_t_user_{uuid.uuid4().hex[:8]}"
    url = libpq_dsn(pg)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
    user_engine = make_engine(pg.url.set(username=role).render_as_string(hide_password=False))
    try:
        r = reindexer(user_engine)
        result = r.check_once()
        assert r.disabled and not result.rebuilt
        assert len(events(caplog, "index_upkeep_unavailable")) == 1
        assert not events(caplog, "index_rebuild_failed")
        assert sizes(pg)["ix_jobs_state"].valid
    finally:
        user_engine.dispose()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_a_busy_executor_waits_for_an_idle_moment_then_checks_anyway(pg: Engine) -> None:
    bloat(pg)
    asked = threading.Semaphore(0)

    def busy() -> bool:
        asked.release()
        return False

    r = reindexer(pg, busy, first_check=0.0, interval=3600.0, busy_retry=0.01)
    r.start()
    try:
        for _ in range(3):  # three turns came while busy: none rebuilt
            assert asked.acquire(timeout=10)
        assert sizes(pg)["ix_jobs_state"].bloated(min_pages=MIN_PAGES)
    finally:
        r.stop()
    assert sizes(pg)["ix_jobs_state"].bloated(min_pages=MIN_PAGES)
    # Busy for a whole interval: the check is not put off for ever.
    r = reindexer(pg, busy, first_check=0.0, interval=0.05, busy_retry=0.01)
    r.start()
    try:
        wait_until(lambda: not sizes(pg)["ix_jobs_state"].bloated(min_pages=MIN_PAGES))
    finally:
        r.stop()


def test_an_idle_executor_rebuilds(pg: Engine) -> None:
    bloat(pg)
    executor = Executor(
        pg, ["default"], 2, reindex_first_check=0.0, reindex_interval=0.05, listen=False
    )
    executor._reindexer.min_pages = MIN_PAGES  # type: ignore[union-attr]
    stop = threading.Event()
    t = threading.Thread(target=executor.run, args=(stop,))
    t.start()
    try:
        wait_until(
            lambda: all(s.valid and not s.bloated(min_pages=MIN_PAGES) for s in sizes(pg).values())
        )
    finally:
        stop.set()
        t.join(30)
    assert not t.is_alive()


def test_index_upkeep_can_be_turned_off(pg: Engine) -> None:
    off = Executor(pg, ["default"], 1, reindex_interval=None, listen=False)
    assert off._reindexer is None  # what rota executor --no-index-upkeep asks for
    assert Executor(pg, ["default"], 1, listen=False)._reindexer is not None


def test_sqlite_executors_have_no_index_upkeep(tmp_path: Path) -> None:
    engine = make_engine(migrated_sqlite_url(tmp_path / "q.db"))
    try:
        assert Executor(engine, ["default"], 1, listen=False)._reindexer is None
    finally:
        engine.dispose()


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)
